"""The start-up resource check: a config the cluster cannot hold is refused with what is missing."""

import pytest

from actors.cluster.join import ResourceError, check_fits

P5 = {"CPU": 192.0, "GPU": 8.0}
HEAD = {"CPU": 0.0}


def test_p5_512_split_fits_64_nodes():
    demands = [
        ("rollout actor", 16, {"CPU": 16, "GPU": 8}),
        ("reward actor", 64, {"CPU": 1}),
        ("learner rank", 384, {"CPU": 8, "GPU": 1}),
    ]
    check_fits(demands, [HEAD] + [P5] * 64)


def test_too_many_gpus_in_total_is_named():
    with pytest.raises(
        ResourceError, match=r"520 GPU in total \(rollout actor 17 x 8, learner rank 384 x 1\) but the cluster has 512"
    ):
        check_fits(
            [("rollout actor", 17, {"CPU": 1, "GPU": 8}), ("learner rank", 384, {"CPU": 1, "GPU": 1})],
            [HEAD] + [P5] * 64,
        )


def test_an_actor_larger_than_any_node_is_named():
    with pytest.raises(ResourceError, match="one rollout actor needs .*'GPU': 16.* but no node has that much"):
        check_fits([("rollout actor", 1, {"CPU": 1, "GPU": 16})], [P5] * 4)


def test_the_laptop_preset_fits_two_cpus():
    demands = [
        ("rollout actor", 1, {"CPU": 0.5, "GPU": 0}),
        ("reward actor", 2, {"CPU": 0.25}),
        ("learner rank", 2, {"CPU": 0.5, "GPU": 0}),
    ]
    check_fits(demands, [{"CPU": 2.0}])
    with pytest.raises(ResourceError, match="2.5 CPU in total"):
        check_fits(demands + [("reward actor", 2, {"CPU": 0.25})], [{"CPU": 2.0}])
