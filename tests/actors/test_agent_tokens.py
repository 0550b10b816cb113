"""An agent episode's tokens (actors/agent/tokens.py): the sequence the learner trains on is
the engine's own, the mask covers exactly the sampled ids, and the whole decodes to what the
chat template would render for the same conversation."""

from __future__ import annotations

import pytest

from actors.agent.tokens import EpisodeTokens, Template, observation_ids
from data.prompt import encode_prompt
from learner.models import build_tiny_tokenizer

SYSTEM, TASK = {"role": "system", "content": "system words"}, {"role": "user", "content": "the task"}


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer

    out = tmp_path_factory.mktemp("tok")
    build_tiny_tokenizer(out)
    return AutoTokenizer.from_pretrained(out)


def test_an_episode_decodes_to_the_templates_conversation_and_masks_only_the_samples(tokenizer):
    template = Template.of(tokenizer)
    assert template.end_of_turn == "<|im_end|>" and template.after_user.endswith("<|im_start|>assistant\n")
    turns = ["Look first.\n```bash\nls\n```", "Fix it.\n```submit\n```"]
    observation = "Exit code: 0\nOutput:\nsetup.py\n"
    episode = EpisodeTokens(encode_prompt(tokenizer, [SYSTEM, TASK]))
    first = tokenizer.encode(turns[0], add_special_tokens=False) + [tokenizer.eos_token_id]  # stopped at its eos
    episode.add_sample(first, [-0.5] * len(first), version=3)
    episode.add_appended(observation_ids(tokenizer, template, observation, ended_with_eos=True))
    assert episode.context() == episode.prompt_ids + episode.completion_ids  # the next request's prompt
    cut = tokenizer.encode(turns[1], add_special_tokens=False)  # cut by the length limit: no eos
    episode.add_sample(cut, [-0.25] * len(cut), version=4)
    messages = [
        SYSTEM,
        TASK,
        {"role": "assistant", "content": turns[0]},
        {"role": "user", "content": observation},
    ]
    rendered = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(episode.context()[: -len(cut)]) == rendered
    sampled = [t for t, m in zip(episode.completion_ids, episode.loss_mask, strict=True) if m == 1.0]
    assert sampled == first + cut and episode.sampled_tokens == len(first) + len(cut)
    assert [lp for lp, m in zip(episode.logprobs, episode.loss_mask, strict=True) if m == 0.0] == [0.0] * (
        len(episode.completion_ids) - len(sampled)
    )
    assert episode.versions == [3, 4]
    # A sample cut before its eos gets the whole end of the turn appended, the eos included.
    again = observation_ids(tokenizer, template, observation, ended_with_eos=False)
    assert again[0] == tokenizer.eos_token_id and again[1:] == observation_ids(tokenizer, template, observation, True)


def test_logprobs_must_match_the_sampled_ids(tokenizer):
    with pytest.raises(ValueError, match="1 logprobs for 2 sampled tokens"):
        EpisodeTokens([1]).add_sample([5, 6], [-1.0], version=0)
