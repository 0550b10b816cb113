"""Weight-sync protocol pieces: bucket planning, pack/unpack, and a real gloo broadcast."""

import multiprocessing as mp
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from learner.transport import buckets, collective, object_store

# The protocol's functions under one name, as the tests used them before the package split.
ws = SimpleNamespace(
    plan_buckets=buckets.plan_buckets,
    pack=buckets.pack,
    unpack=buckets.unpack,
    digest=buckets.digest,
    to_array=object_store.to_array,
    listen_socket=collective.listen_socket,
    SyncGroupSpec=collective.SyncGroupSpec,
    join_group=collective.join_group,
    send=collective.send,
    receive=collective.receive,
    _new_backend=collective._new_backend,
)


def from_arrays(plan, arrays, device, digests):
    """The object-store receiver, with each bucket's digest (what the engine's loader records)."""
    for bucket, arr in zip(plan, arrays, strict=True):
        items = list(object_store.from_arrays([bucket], [arr], device))
        digests.append(buckets.digest(torch.cat([t.reshape(-1) for _, t in items])))
        yield from items


def test_plan_buckets_respects_size_and_dtype():
    params = [
        ("a", (4, 4), "float32"),
        ("b", (8,), "float32"),
        ("c", (100,), "float32"),
        ("d", (2,), "bfloat16"),
        ("e", (3,), "float32"),
    ]
    plan = ws.plan_buckets(params, bucket_bytes=128)  # 32 floats per bucket
    assert [[s.name for s in b.slots] for b in plan] == [["a", "b"], ["c"], ["d"], ["e"]]
    assert plan[0].numel == 24 and plan[0].slots[1].offset == 16
    assert plan[2].dtype == "bfloat16"


def test_pack_unpack_roundtrip_and_digest():
    tensors = [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([7.0, 8.0])]
    (bucket,) = ws.plan_buckets([("x", (2, 3), "float32"), ("y", (2,), "float32")], 1 << 20)
    flat = ws.pack(bucket, tensors)
    assert flat.tolist() == [0, 1, 2, 3, 4, 5, 7, 8]
    out = dict(ws.unpack(bucket, flat))
    assert torch.equal(out["x"], tensors[0]) and torch.equal(out["y"], tensors[1])
    # The object-store path gives the same bytes, hence the same digest (bf16 included).
    for dtype in ("float32", "bfloat16"):
        (b,) = ws.plan_buckets([("x", (2, 3), dtype), ("y", (2,), dtype)], 1 << 20)
        packed = ws.pack(b, tensors)
        digests = []
        got = dict(from_arrays([b], [ws.to_array(packed)], torch.device("cpu"), digests))
        assert digests == [ws.digest(packed)]
        assert torch.equal(got["x"], tensors[0].to(got["x"].dtype))


def _receiver(rank, spec, plan, queue):
    group = ws.join_group(spec, rank)
    queue.put((rank, {k: v.clone().numpy() for k, v in ws.receive(group, plan, torch.device("cpu"))}))


def test_gloo_broadcast_delivers_every_tensor_to_every_receiver():
    plan = ws.plan_buckets(
        [("w1", (64, 32), "float32"), ("b1", (32,), "float32"), ("w2", (32, 16), "float32")], bucket_bytes=4096
    )
    assert len(plan) >= 2  # several buckets travel, in order
    listen = ws.listen_socket("127.0.0.1")
    spec = ws.SyncGroupSpec("127.0.0.1", listen.getsockname()[1], world_size=3, backend="gloo", timeout_s=60)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_receiver, args=(r, spec, plan, queue)) for r in (1, 2)]
    for p in procs:
        p.start()
    group = ws.join_group(spec, 0, listen)  # this process is the sender, sync rank 0
    g = torch.Generator().manual_seed(0)
    tensors = {s.name: torch.randn(s.shape, generator=g) for b in plan for s in b.slots}
    ws.send(group, (ws.pack(b, [tensors[s.name] for s in b.slots]) for b in plan))
    results = dict(queue.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    sent = {k: v.numpy() for k, v in tensors.items()}
    for r in (1, 2):
        assert set(results[r]) == set(sent)
        for name, value in sent.items():
            np.testing.assert_array_equal(results[r][name], value)


def test_only_rank_zero_hosts_the_store():
    spec = ws.SyncGroupSpec("127.0.0.1", 1, 2, "gloo", 1)
    with pytest.raises(ValueError, match="only it, hosts the store"):
        ws.join_group(spec, 0)


def test_unknown_backend_is_named():
    spec = ws.SyncGroupSpec("127.0.0.1", 1, 1, "mpi", 1)
    with pytest.raises(ValueError, match="'gloo', 'nccl'"):
        ws._new_backend(spec, None, 0)
