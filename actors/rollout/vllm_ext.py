"""The receiving end of weight sync, running inside vLLM's worker (one per TP rank).

vLLM mixes this class into its Worker (`LLM(worker_extension_cls=...)`); the rollout actor
calls its methods through `llm.collective_rpc`, which runs them on every TP worker of the
engine. The bytes arrive through a weight transport (learner/transport/); this class loads them.

Why loading uses vLLM's layerwise reload rather than `model.load_weights` alone: after loading,
vLLM post-processes weights into kernel formats; on CPU every linear layer's weight is
repacked for oneDNN and the original parameter is replaced by an empty tensor, so a plain
`load_weights` has nothing to copy into. The layerwise reload restores each layer's
checkpoint-format parameters, loads, re-runs the post-processing per layer as soon as the
layer is complete, and copies the result back into the kernel tensors the engine already uses.

What is not loaded, on purpose: layers whose only tensors are non-persistent buffers (the
rotary embedding's cos/sin cache: derived, never in a checkpoint) and a tied lm_head (the
learner sends the embedding once, and it is re-tied below). vLLM's `reload_weights` would
count those as layers that "Failed to load weights" on every sync and put their old tensors
back; here they are told up front that nothing is coming, so their tensors simply stay, and
the warning keeps its meaning (a layer that should have received weights and did not).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from learner.transport import TransportCache, WeightTransport
from learner.transport.buckets import Bucket


class WeightSyncExtension:
    """Methods added to vLLM's Worker. `self.model_runner`, `self.rank` and `self.device` are the Worker's."""

    model_runner: Any
    rank: int
    device: Any
    _transports: TransportCache | None = None
    _digests: list[str] | None = None

    def _transport(self, cls: type[WeightTransport]) -> WeightTransport:
        if self._transports is None:
            self._transports = TransportCache()
        return self._transports(cls)

    def weights_join(self, transport: type[WeightTransport], spec: Any, first_rank: int) -> None:
        """Join the transport's group as `first_rank + this worker's TP rank`."""
        self._transport(transport).join(spec, first_rank + self.rank)

    def weights_receive(self, transport: type[WeightTransport], plan: list[Bucket], payload: Any) -> int:
        """Receive one full set of buckets and load them. Returns the number of tensors loaded."""
        weights = self._transport(transport).receive(plan, payload, self._load_device())
        return self._load(self._digested(plan, weights))

    def weights_digests(self) -> list[str]:
        """sha256 of each bucket's bytes in the last load (equal across transports)."""
        return list(self._digests or [])

    def _load_device(self) -> torch.device:
        return torch.device(self.device) if getattr(self, "device", None) is not None else torch.device("cpu")

    def _digested(
        self, plan: list[Bucket], weights: Iterable[tuple[str, torch.Tensor]]
    ) -> Iterator[tuple[str, torch.Tensor]]:
        """Pass the tensors through, hashing each bucket's slots in order (= the bucket's buffer)."""
        self._digests = []
        bucket_of = {slot.name: i for i, bucket in enumerate(plan) for slot in bucket.slots}
        current, h = -1, hashlib.sha256()
        for name, tensor in weights:
            if bucket_of[name] != current:
                if current >= 0:
                    self._digests.append(h.hexdigest())
                current, h = bucket_of[name], hashlib.sha256()
            h.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
            yield name, tensor
        if current >= 0:
            self._digests.append(h.hexdigest())

    def _load(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        # vLLM's loader: inside vLLM's worker process only
        from vllm.model_executor.model_loader.reload import layerwise

        model = self.model_runner.get_model()
        skipped = self._never_loaded(model)
        layerwise.initialize_layerwise_reload(model)
        for layer in skipped:  # nothing will arrive for these: keep their tensors, say nothing
            layerwise.get_layerwise_info(layer).load_numel_total = 0
        count = 0

        def counted() -> Iterator[tuple[str, torch.Tensor]]:
            nonlocal count
            for item in weights:
                count += 1
                yield item

        model.load_weights(counted())
        layerwise.finalize_layerwise_reload(model, self.model_runner.vllm_config.model_config)
        self._retie_embeddings()
        return count

    @staticmethod
    def _never_loaded(model: torch.nn.Module) -> list[torch.nn.Module]:
        """Layers that no checkpoint fills: only non-persistent buffers, or a tied lm_head."""
        layers = []
        for layer in model.modules():
            params = [p for p in layer._parameters.values() if p is not None]
            buffers = [n for n, b in layer._buffers.items() if b is not None]
            if not params and buffers and all(n in layer._non_persistent_buffers_set for n in buffers):
                layers.append(layer)
        if getattr(model.config, "tie_word_embeddings", False) and hasattr(model, "lm_head"):
            layers.append(model.lm_head)
        return layers

    def _retie_embeddings(self) -> None:
        # A tied lm_head is never "loaded" (checkpoints omit it), so its post-processing (the
        # repacked oneDNN copy on CPU) is not re-run by the reload and would serve stale logits.
        model = self.model_runner.get_model()
        if not getattr(model.config, "tie_word_embeddings", False):
            return
        # vLLM's decoder-only models keep the input embedding at model.model.embed_tokens.
        lm_head, embed = model.lm_head, model.model.embed_tokens
        lm_head.weight = embed.weight
        lm_head.quant_method.process_weights_after_loading(lm_head)
