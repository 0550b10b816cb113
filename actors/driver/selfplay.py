"""Self-play (`trainer.selfplay=true`): one policy writes the step's bugs, then repairs them.

Self-play SWE-RL (Wei et al. 2025) without its agent scaffold: each step replaces the
generate and reward phases of GroupSampler.sample with four stages (timed as the phases
generate, prove, generate, reward), on the same fleet and pools:

    inject    each of the step's instances (its fixed code: data/bugs/injector.py working_tree)
              is an injector prompt (data/bugs/model_bugs.py); group_size answers each, the
              last `selfplay.guided_bugs` of them bugs the rules injector drew, written as
              answers (finish_reason "oracle": guided, as rollout.oracle_samples_per_group)
    prove     the answers as bugs, proved by the instance's tests in the sandbox on the
              test-runner pool (data/bugs/proof.py: baseline twice, each bug twice, the inverse
              check; exact duplicates within the step are one bug)
    solve     the first `selfplay.max_bugs` proved bugs (default prompts_per_step) are solver
              prompts (the paper's prompt: the failing tests' report and the buggy files),
              group_size answers each (the last rollout.oracle_samples_per_group of them the
              inverse of the bug, as in any step), scored by `reward.kind` on the reward actors;
              with rollout.mode=agent, group_size agent episodes each in a sandbox session of
              the buggy tree, their final patches scored (the injector still answers in one turn)
    score     each injector answer's reward by its bug's solve rate over the solver's own
              samples (oracle ones left out; reward/bug_reward.py);
              a valid bug past max_bugs has no solve rate and is left out of the loss (its
              sample is marked invalid, as a failed agent episode is)

The step then trains on the injector groups and the solver groups together (the advantages,
losses and sync are the usual ones). Counts (`selfplay_*` metrics): bugs proposed, valid,
solved, guided, each reason for rejection, the injector's and the solver's mean reward.
The test runs cost: a source's baseline runs twice the first step it is drawn (then it is
known: data/bugs/proof.py `baseline_cache`, kept for the run; one that failed runs again), and each
answer twice; a cluster's test-runner pool (reward.execution.num_runners) takes them in parallel.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import Any

from actors.driver.dynamic_sampling import GroupSampler
from actors.driver.generation import Group, Rollouts, request_id
from actors.driver.reward_pool import RewardPool, ScoredJob
from actors.observe.phases import PhaseTimer
from actors.rollout.actor import Completion, GenerationRequest, request_seed
from conf.config import TrainConfig
from data.bugs.injector import REJECTIONS, BugCandidate, BugOutcome, buggy_tree, candidates, working_tree
from data.bugs.model_bugs import bug_messages
from data.bugs.mutations import OPERATORS
from data.bugs.proof import Baseline, Covered, inject, read_answers, why_unusable
from data.loader import InstanceLoader, PromptItem
from data.prompt import encode_prompt
from data.schema import Instance
from reward.bug_reward import INVALID, injector_reward, solve_rate
from reward.core import RewardResult
from reward.execution.pool import TestPool
from reward.oracle import oracle_completion

GUIDED = "oracle"  # a guided bug's finish_reason: the learner's logprobs stand in for the engine's


class SelfPlay(GroupSampler):
    """The generate and reward phases of a self-play step (module docstring)."""

    def __init__(self, cfg: TrainConfig, rollouts: Rollouts, rewards: RewardPool) -> None:
        super().__init__(cfg, rollouts, rewards)
        self.pool = TestPool(replace(cfg.reward.execution, wall_s=cfg.selfplay.wall_s))
        self.baselines: dict[str, Baseline] = {}  # by baseline_key: each source's runs once a run

    @staticmethod
    def check_data(cfg: TrainConfig, loader: InstanceLoader) -> None:
        """GroupSampler's checks, and instances self-play can prove bugs in: their own files
        hold the whole repository, and they have tests (data/bugs/proof.py why_unusable)."""
        GroupSampler.check_data(cfg, loader)
        loader.require_rows("trainer.selfplay=true", ("environment", "test_patch"), why_unusable)

    def shutdown(self) -> None:
        self.pool.shutdown()

    def sample(
        self, step: int, policy_version: int, timer: PhaseTimer
    ) -> tuple[list[Group], list[ScoredJob], dict[str, Any]]:
        cfg, tok = self.cfg, self.rollouts.tokenizer
        items, _ = self.rollouts.pending.pop(step)
        with timer("generate"):  # the injector's answers (the solver's below add to it)
            prompts = [PromptItem(it.instance, encode_prompt(tok, self._messages(it.instance))) for it in items]
            injectors = self._generate(step, "inject", prompts)
        with timer("prove"):
            answers: dict[int, tuple[Group, int]] = {}  # id(candidate) -> its injector group and answer

            def draw(
                sources: list[Instance], _covered: list[Covered]
            ) -> tuple[list[list[BugCandidate]], list[BugOutcome]]:
                by_id = {g.item.instance_id: g for g in injectors}
                texts = [[c.text for c in by_id[s.instance_id].completions] for s in sources]
                drawn, rejected, owners = read_answers(sources, texts)
                for cand, (i, k) in owners:
                    answers[id(cand)] = (by_id[sources[i].instance_id], k)
                return drawn, rejected

            outcomes = inject(
                [it.instance for it in items],
                self.pool,
                near_dup_threshold=0.0,
                draw=draw,
                baseline_cache=self.baselines,
            )
        verdicts, counts = self._verdicts(outcomes, answers, injectors)
        limit = cfg.selfplay.max_bugs or cfg.trainer.prompts_per_step
        bugs = [o for o in outcomes if o.reason == "kept" and o.instance is not None][:limit]
        with timer("generate"):
            solvers = self._generate(step, "solve", [self._solver_item(o.instance) for o in bugs if o.instance])
        with timer("reward"):
            solved = self.rewards.score_groups(solvers) if solvers else []
        rates = {}
        for g, start in zip(solvers, range(0, len(solved), cfg.group_size), strict=True):
            own = [
                s.result.reward
                for s, c in zip(solved[start:], g.completions, strict=False)
                if c.finish_reason != GUIDED
            ]
            rates[_key(g.item.instance)] = solve_rate(own)  # the policy's own repairs, not the oracle's
        scored, invalid = self._injector_scores(injectors, verdicts, rates)
        groups = [self._masked(g, invalid) for g in injectors] + solvers
        counts.update(
            selfplay_bugs_solved_groups=len(solvers),
            selfplay_solve_rate=round(sum(rates.values()) / len(rates), 4) if rates else 0.0,
            selfplay_injector_reward=round(sum(s.result.reward for s in scored) / max(len(scored), 1), 4),
            selfplay_left_out=len(invalid),
        )
        return groups, scored + solved, counts

    def _messages(self, inst: Instance) -> list[dict[str, str]]:
        return bug_messages(inst, working_tree(inst), self.cfg.seed)

    def _solver_item(self, inst: Instance) -> PromptItem:
        """The paper's prompt of the bug's instance, or with rollout.mode=agent the agent's task."""
        messages = Rollouts.messages(self.cfg)(inst, self.cfg.seed)
        return PromptItem(inst, encode_prompt(self.rollouts.tokenizer, messages))

    def _generate(self, step: int, role: str, items: list[PromptItem]) -> list[Group]:
        if not items:
            return []
        ids = [request_id(step, slot, f"{role}/{it.instance_id}") for slot, it in enumerate(items)]
        seeds = [request_seed(self.cfg.seed, rid) for rid in ids]
        reqs = [  # the solver's groups are episodes in agent mode; the injector answers in one turn
            GenerationRequest(
                r, it.prompt_ids, self.cfg.group_size, s, episode=self.rollouts.episode(it) if role == "solve" else None
            )
            for r, it, s in zip(ids, items, seeds, strict=True)
        ]
        fleet = self.rollouts.fleet
        fleet.submit(reqs)
        groups = []
        for it, result in zip(items, fleet.results(ids), strict=True):
            if role == "solve":  # the solver is guided as any step is (rollout.oracle_samples_per_group)
                groups.append(self.rollouts.as_group(it, result))
                continue
            completions = result.completions
            if self.cfg.selfplay.guided_bugs:
                completions = self._guided(it.instance, completions, step)
            groups.append(Group(result.request_id, it, completions, result.policy_version, result.actor_id))
        return groups

    def _guided(self, inst: Instance, completions: list[Completion], step: int) -> list[Completion]:
        """The group with its last guided_bugs answers replaced by rules bugs written as answers."""
        k = self.cfg.selfplay.guided_bugs
        tree = working_tree(inst)
        drawn = candidates(inst, k, 1, self.cfg.seed + step, OPERATORS)
        guided = []
        for cand in drawn:
            buggy = buggy_tree(inst, cand.bug)
            bug = {p: buggy[p] for p in {m.path for m in cand.bug}}
            answer = oracle_completion(
                self.rollouts.tokenizer, replace(inst, code_context=tree, oracle_new_content=bug)
            )
            if answer is not None:
                guided.append(Completion(answer[1], [], answer[0], GUIDED))
        return completions[: len(completions) - len(guided)] + guided if guided else completions

    def _verdicts(
        self, outcomes: list[BugOutcome], answers: dict[int, tuple[Group, int]], injectors: list[Group]
    ) -> tuple[dict[tuple[str, int], tuple[str, Instance | None]], dict[str, Any]]:
        """(injector request id, answer) -> (reason, the bug's instance when proved), and counts."""
        verdicts: dict[tuple[str, int], tuple[str, Instance | None]] = {}
        kept = {o.instance.instance_id: o.instance for o in outcomes if o.reason == "kept" and o.instance is not None}
        reasons: Counter[str] = Counter()
        for o in outcomes:
            if o.candidate is None or id(o.candidate) not in answers:  # the source's baseline failed
                for g in injectors:
                    if g.item.instance_id == o.source_id:
                        for k in range(len(g.completions)):
                            verdicts[(g.request_id, k)] = (o.reason, None)
                reasons[o.reason] += 1
                continue
            group, k = answers[id(o.candidate)]
            inst = o.instance
            if o.reason == "duplicate":  # the same bug as a kept one ("like <id>"): the same solve rate
                inst = kept.get(o.detail.removeprefix("like "))
            verdicts[(group.request_id, k)] = (o.reason, inst)
            reasons[o.reason] += 1
        proposed = sum(len(g.completions) for g in injectors)
        guided = sum(c.finish_reason == GUIDED for g in injectors for c in g.completions)
        counts: dict[str, Any] = {
            "selfplay_bugs_proposed": proposed,
            "selfplay_bugs_guided": guided,
            "selfplay_bugs_valid": sum(1 for r, i in verdicts.values() if i is not None),
        }
        # Every reason, 0 included, so that each is a gauge from the first step. A duplicate of a
        # kept bug is valid (it shares that bug's solve rate): counted in selfplay_bugs_valid.
        counts.update({f"selfplay_rejected_{r}": reasons[r] for r in REJECTIONS if r != "duplicate"})
        return verdicts, counts

    def _injector_scores(
        self,
        injectors: list[Group],
        verdicts: dict[tuple[str, int], tuple[str, Instance | None]],
        rates: dict[str, float],
    ) -> tuple[list[ScoredJob], set[tuple[str, int]]]:
        """Every injector answer's score, and the answers left out (valid, not repaired)."""
        alpha = self.cfg.selfplay.alpha
        out, invalid = [], set()
        for g in injectors:
            for k in range(len(g.completions)):
                reason, inst = verdicts.get((g.request_id, k), ("lost", None))
                rid = f"{g.request_id}/{k}"
                if inst is None:
                    out.append(ScoredJob(rid, RewardResult(INVALID, f"invalid bug: {reason}")))
                elif _key(inst) not in rates:
                    invalid.add((g.request_id, k))
                    out.append(ScoredJob(rid, RewardResult(0.0, "valid bug, not repaired this step")))
                else:
                    s = rates[_key(inst)]
                    out.append(ScoredJob(rid, RewardResult(injector_reward(True, s, alpha), f"solve rate {s:.3f}")))
        return out, invalid

    @staticmethod
    def _masked(group: Group, invalid: set[tuple[str, int]]) -> Group:
        """The group with its answers left out of the loss marked as valid_samples reads them."""
        if not any((group.request_id, k) in invalid for k in range(len(group.completions))):
            return group
        completions = [
            replace(c, finish_reason="infra") if (group.request_id, k) in invalid else c
            for k, c in enumerate(group.completions)
        ]
        return replace(group, completions=completions)


def _key(inst: Instance) -> str:
    return inst.patch
