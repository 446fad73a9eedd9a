"""What llama.cpp's engine keeps so that a prompt is not read twice: a conversation's cache saved when its slot is
given away or Hearth stops (``saved_slots``, chosen by ``saved_slot_policy``, held by ``slot_keeper``), the instructions
every conversation starts with copied between slots, and passages read once and joined into later prompts
(``passage_store`` in memory, ``passage_shelf`` on disk, ``kept_state`` at 8 bits, ``passage_join`` and
``stream_join`` in the scheduler, the prompt cut at them by ``prompt_spans``), all over ``state_cells``, llama.cpp's
layout of a sequence's state."""
