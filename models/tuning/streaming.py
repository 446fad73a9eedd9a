"""Training a model whose weights do not fit the GPU: the decoder layers' frozen weights stay in (pinned) host
memory and a window of layers is copied onto the GPU as the forward pass, and the backward pass's recomputation,
reach them (the STRONGHOLD idea). The adapter's weights, their gradients and the optimizer state live on the GPU
all the time; they are small.

Only layers run under gradient checkpointing may be streamed: a checkpointed layer keeps none of its tensors for
the backward pass and runs its forward again there, which brings its weights back through the same hook (on the
layer's first step, its input norm: inside the checkpointed forward). The next
layer in the direction of travel is copied on a side stream while the current one computes.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any


class LayerWindow:
    """Keeps at most ``size`` of ``layers``' frozen weights on ``device``; the rest wait in host memory."""

    def __init__(self, layers: Sequence[Any], device: Any, size: int) -> None:
        import torch

        if size < 1:
            raise ValueError("a window holds at least one layer")
        self.device = torch.device(device)
        self.size = size
        self._cuda = self.device.type == "cuda"
        self._frozen = [[p for p in layer.parameters() if not p.requires_grad] for layer in layers]
        self._host = [[self._to_host(p.data) for p in params] for params in self._frozen]
        for params, host in zip(self._frozen, self._host, strict=True):
            for param, kept in zip(params, host, strict=True):
                param.data = kept
        self._resident: OrderedDict[int, list[Any]] = OrderedDict()  # layer -> its weights on the device
        self._arriving: dict[int, Any] = {}  # layer -> the CUDA event its copy completes
        self._copier = torch.cuda.Stream(self.device) if self._cuda else None  # type: ignore[no-untyped-call]
        self._last = -1
        self.most_resident = 0
        self.visits: list[int] = []  # the order the layers ran in, recomputations included
        self._hooks = [
            _first_step(layer).register_forward_pre_hook(lambda _module, _args, index=index: self._enter(index))
            for index, layer in enumerate(layers)
        ]

    def _to_host(self, tensor: Any) -> Any:
        host = tensor.detach().to("cpu")
        return host.pin_memory() if self._cuda else host

    def _enter(self, index: int) -> None:
        import torch

        self.visits.append(index)
        forward = index >= self._last
        self._last = index
        self._bring(index)
        if index in self._arriving:
            event = self._arriving.pop(index)
            current = torch.cuda.current_stream(self.device)
            current.wait_event(event)
            for tensor in self._resident[index]:
                tensor.record_stream(current)  # freed only once the compute stream is done with it
        self._resident.move_to_end(index)
        following = index + (1 if forward else -1)
        if self._cuda and self.size >= 2 and 0 <= following < len(self._frozen):
            self._bring(following, ahead=True)
        for param, tensor in zip(self._frozen[index], self._resident[index], strict=True):
            param.data = tensor

    def _bring(self, index: int, ahead: bool = False) -> None:
        import torch

        if index in self._resident:
            return
        keep = {index, self._last}
        while len(self._resident) >= self.size:
            victim = next(i for i in self._resident if i not in keep)
            self._evict(victim)
        if ahead and self._copier is not None:
            self._copier.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self._copier):
                copies = [kept.to(self.device, non_blocking=True) for kept in self._host[index]]
                event = torch.cuda.Event()  # type: ignore[no-untyped-call]
                event.record(self._copier)
            self._arriving[index] = event
        else:
            copies = [kept.to(self.device, non_blocking=self._cuda) for kept in self._host[index]]
        self._resident[index] = copies
        self.most_resident = max(self.most_resident, len(self._resident))

    def _evict(self, index: int) -> None:
        self._resident.pop(index)
        self._arriving.pop(index, None)
        for param, kept in zip(self._frozen[index], self._host[index], strict=True):
            param.data = kept

    def streamed(self) -> set[int]:
        """The ids of the parameters this window moves (every layer's frozen weights); the rest stay put."""
        return {id(p) for params in self._frozen for p in params}

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        for index in list(self._resident):
            self._evict(index)


def _first_step(layer: Any) -> Any:
    """The module a layer's forward calls first. Its hook runs inside the layer's checkpointed forward, so it runs
    again when the backward pass recomputes the layer; transformers keeps hooks on the layer itself outside the
    checkpoint (they would not run again)."""
    return getattr(layer, "input_layernorm", layer)


def decoder_layers(model: Any) -> Any:
    """The model's stack of decoder layers (llama and qwen2 keep it at ``model.layers``)."""
    import torch

    count = int(model.config.num_hidden_layers)
    for name, module in model.named_modules():
        if name.endswith("layers") and isinstance(module, torch.nn.ModuleList) and len(module) == count:
            return module
    raise ValueError("no stack of decoder layers found")


def stream_layers(model: Any, device: Any, size: int) -> LayerWindow:
    """Put everything of ``model`` but its decoder layers' frozen weights on ``device`` and stream those through
    a window of ``size`` layers. The model is marked as placed (``hf_device_map``), so neither the ``Trainer`` nor
    accelerate moves it whole."""
    import torch

    layers = decoder_layers(model)
    window = LayerWindow(layers, device, size)
    streamed = window.streamed()
    target = torch.device(device)
    for param in model.parameters():
        if id(param) not in streamed:
            param.data = param.data.to(target)
    for module in model.modules():
        for name, buffer in list(module._buffers.items()):
            if buffer is not None:
                module._buffers[name] = buffer.to(target)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    base.hf_device_map = {"layers (streamed)": "cpu", "": str(target)}
    return window
