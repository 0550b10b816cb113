"""The receiving end of weight sync, running inside vLLM's worker (one per TP rank).

vLLM mixes this class into its Worker (`LLM(worker_extension_cls=...)`); the rollout actor
calls its methods through `llm.collective_rpc`, which runs them on every TP worker of the
engine. See actors/weight_sync.py for the protocol.

Why loading goes through `model_runner.reload_weights` rather than `model.load_weights`:
after loading, vLLM post-processes weights into kernel formats; on CPU every linear layer's
weight is repacked for oneDNN and the original parameter is replaced by an empty tensor, so a
plain `load_weights` has nothing to copy into. `reload_weights` restores each layer's
checkpoint-format parameters, loads, re-runs the post-processing per layer, and copies the
result back into the kernel tensors the engine already uses.
"""

from __future__ import annotations

from typing import Any

import torch

from actors import weight_sync


class WeightSyncExtension:
    """Methods added to vLLM's Worker. `self.model_runner`, `self.rank` and `self.device` are the Worker's."""

    _sync_group: Any = None
    _sync_plan: list[weight_sync.Bucket] | None = None
    _sync_digests: list[str] | None = None

    def sync_join(self, spec: weight_sync.SyncGroupSpec, first_rank: int, plan: list[weight_sync.Bucket]) -> None:
        """Join the sync group as `first_rank + this worker's TP rank`."""
        self._sync_plan = plan
        self._sync_group = weight_sync.join_group(spec, first_rank + self.rank)

    def sync_receive(self) -> int:
        """Receive one full set of buckets over the group and load them. Returns tensors loaded."""
        assert self._sync_group is not None and self._sync_plan is not None, "sync_join first"
        self._sync_digests = []
        return self._load(weight_sync.receive(self._sync_group, self._sync_plan, self._load_device(), self._sync_digests))

    def sync_load_arrays(self, plan: list[weight_sync.Bucket], arrays: list[Any]) -> int:
        """Object-store path: the same buckets as numpy arrays."""
        self._sync_digests = []
        return self._load(weight_sync.from_arrays(plan, arrays, self._load_device(), self._sync_digests))

    def sync_digests(self) -> list[str]:
        """Content hashes of the buckets of the last sync (identical for both paths)."""
        return list(self._sync_digests or [])

    def sync_leave(self) -> None:
        self._sync_group = None

    def _load_device(self) -> torch.device:
        return torch.device(self.device) if getattr(self, "device", None) is not None else torch.device("cpu")

    def _load(self, weights: Any) -> int:
        count = 0

        def counted() -> Any:
            nonlocal count
            for item in weights:
                count += 1
                yield item

        self.model_runner.reload_weights(weights_iterator=counted(), is_checkpoint_format=True)
        self._retie_embeddings()
        return count

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
