"""An agent episode's tokens, token in and token out: what the learner trains on is exactly what
the engine saw and sampled, never a re-tokenised transcript.

An episode is one sequence: the prompt (system and task, chat-templated, ending with the
assistant turn's opening), then for each turn the ids the engine sampled, then the ids appended
before the next turn: the chat template's end of the assistant turn (unless the sample already
ended with it), the observation as a user message, and the next assistant turn's opening. The
appended ids are tokenised on their own and concatenated: the next request's prompt is the
previous request's prompt plus its sample plus them, so the engine's prefix cache holds across
turns, and the sequence the learner sees is the engine's. (Re-applying the chat template to
the final messages would re-tokenise the samples: veRL's multi-turn docs report that this kept
PPO from converging; a sample's text need not tokenise back to its ids.)

    loss_mask   1 on every sampled id, 0 on every appended one (learner/batch.py TrainSample)
    logprobs    the engine's for sampled ids, 0.0 (a placeholder the mask hides) for appended
    versions    the policy version of each turn's sample (an episode can span a weight update
                in async mode: staleness counts from its first turn)

The template's pieces come from rendering a conversation with sentinel texts once per
tokenizer (`Template`): what comes between an assistant message's content and a user
message's content, and between that and the next assistant content.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_ASSISTANT, _USER = "\ue000ASSISTANT\ue000", "\ue000USER\ue000"  # private-use sentinels no text contains


@dataclass(frozen=True)
class Template:
    """The chat template's text between turns, read off one rendering with sentinels."""

    after_assistant: str  # from the end of an assistant message's content to a user message's content
    after_user: str  # from the end of a user message's content to the next assistant content
    end_of_turn: str  # the token text an assistant sample ends with when it stops (the eos)

    @classmethod
    def of(cls, tokenizer: Any) -> Template:
        messages = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": _ASSISTANT},
            {"role": "user", "content": _USER},
        ]
        text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        rest = text.split(_ASSISTANT, 1)[1]
        between, after = rest.split(_USER, 1)
        eos = tokenizer.eos_token or ""
        if not between.startswith(eos):
            raise ValueError(f"the chat template does not end an assistant turn with the eos token {eos!r}")
        return cls(between, after, eos)


@dataclass
class EpisodeTokens:
    """One episode's sequence as it grows (module docstring)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    loss_mask: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)

    def context(self) -> list[int]:
        """The next request's prompt: everything so far."""
        return self.prompt_ids + self.completion_ids

    def add_sample(self, token_ids: list[int], logprobs: list[float], version: int) -> None:
        if len(token_ids) != len(logprobs):
            raise ValueError(f"{len(logprobs)} logprobs for {len(token_ids)} sampled tokens")
        self.completion_ids += token_ids
        self.logprobs += logprobs
        self.loss_mask += [1.0] * len(token_ids)
        self.versions.append(version)

    def add_appended(self, token_ids: list[int]) -> None:
        self.completion_ids += token_ids
        self.logprobs += [0.0] * len(token_ids)
        self.loss_mask += [0.0] * len(token_ids)

    @property
    def sampled_tokens(self) -> int:
        return int(sum(self.loss_mask))


def observation_ids(tokenizer: Any, template: Template, observation: str, ended_with_eos: bool) -> list[int]:
    """The ids appended after a sample for the observation `observation`: the rest of the
    assistant turn's end (all of it when the sample was cut before its eos), the user message,
    and the next assistant turn's opening."""
    head = template.after_assistant[len(template.end_of_turn) :] if ended_with_eos else template.after_assistant
    return [int(i) for i in tokenizer.encode(head + observation + template.after_user, add_special_tokens=False)]
