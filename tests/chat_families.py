"""Chat templates in the formats of the curated hub models' families, written for these tests from the formats
their makers document (the turn markers, where the system message and the tools go, the thinking switch); not
copies of the makers' files. What each keeps of its family is what Hearth depends on:

- ``LLAMA3``: header-marked turns, a system turn always present, answers ended by ``<|eot_id|>``;
- ``QWEN3``: ChatML, the tools listed in the system turn with the ``<tool_call>`` form, earlier thinking dropped
  from assistant turns, and the ``enable_thinking`` switch that writes an empty thinking block when false;
- ``THINKS_ALWAYS``: a template that opens the thinking block in the prompt (as DeepSeek-R1's distillations do);
- ``GEMMA2``: no system role at all (the template raises), roles strictly alternating, ``model`` for the assistant;
- ``GEMMA3``: the same turns, the system message put at the head of the first question by the template itself;
- ``PHI4_MINI``: ``<|role|>`` turns ended by ``<|end|>``, the tools as JSON inside ``<|tool|>`` in the system turn.
"""

from __future__ import annotations

LLAMA3 = (
    "{{ bos_token }}"
    "{% if messages and messages[0]['role'] == 'system' %}"
    "{% set system = messages[0]['content'] | trim %}{% set turns = messages[1:] %}"
    "{% else %}{% set system = '' %}{% set turns = messages %}{% endif %}"
    "{{ '<|start_header_id|>system<|end_header_id|>\\n\\nKnowledge up to: 2023\\n\\n' + system + '<|eot_id|>' }}"
    "{% for message in turns %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim }}"
    "{{ '<|eot_id|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}"
)

QWEN3 = (
    "{% if tools %}"
    "{{ '<|im_start|>system\\n' }}"
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + '\\n\\n' }}{% endif %}"
    "{{ '# Functions you may call\\n\\n<tools>' }}"
    "{% for tool in tools %}{{ '\\n' + (tool | tojson) }}{% endfor %}"
    "{{ '\\n</tools>\\n\\nTo call one, write its name and arguments as JSON between <tool_call> and </tool_call>."
    "<|im_end|>\\n' }}"
    "{% elif messages[0]['role'] == 'system' %}"
    "{{ '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}"
    "{{ '<|im_start|>assistant\\n' + message['content'].split('</think>')[-1].lstrip('\\n') + '<|im_end|>\\n' }}"
    "{% elif message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + '\\n</tool_response><|im_end|>\\n' }}"
    "{% elif message['role'] != 'system' %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}"
)

THINKS_ALWAYS = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n<think>\\n' }}{% endif %}"
)

GEMMA2 = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

GEMMA3 = (
    "{{ bos_token }}"
    "{% if messages[0]['role'] == 'system' %}"
    "{% set first = messages[0]['content'] + '\\n\\n' %}{% set turns = messages[1:] %}"
    "{% else %}{% set first = '' %}{% set turns = messages %}{% endif %}"
    "{% for message in turns %}"
    "{% set role = 'model' if message['role'] == 'assistant' else message['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + (first if loop.first else '') + message['content'] | trim }}"
    "{{ '<end_of_turn>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)

PHI4_MINI = (
    "{% for message in messages %}"
    "{% if message['role'] == 'system' and tools %}"
    "{{ '<|system|>' + message['content'] + '<|tool|>' + (tools | tojson) + '<|/tool|><|end|>' }}"
    "{% else %}{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}"
)

FAMILIES = {
    "llama3": LLAMA3,
    "qwen3": QWEN3,
    "thinks-always": THINKS_ALWAYS,
    "gemma2": GEMMA2,
    "gemma3": GEMMA3,
    "phi4-mini": PHI4_MINI,
}
