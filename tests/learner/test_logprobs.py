"""Chunked completion logprobs equal the naive full-logits computation, values and gradients."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from learner.logprobs import completion_logprobs, sequence_logprobs_reference


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=97,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(cfg).double()


@pytest.mark.parametrize("chunk", [1, 3, 64])
@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_equals_reference(model, chunk, temperature):
    torch.manual_seed(1)
    ids = torch.randint(0, 97, (2, 12))
    prompt_lens = torch.tensor([4, 7])
    T = 8  # row 1 has only 5 completion tokens: the rest point at padding, masked by callers
    lp, _ = completion_logprobs(
        model, ids, torch.ones_like(ids), prompt_lens, T, temperature=temperature, chunk_tokens=chunk
    )
    ref = sequence_logprobs_reference(model, ids, prompt_lens, T, temperature=temperature)
    assert torch.allclose(lp[0], ref[0], atol=1e-10)
    assert torch.allclose(lp[1, :5], ref[1, :5], atol=1e-10)


def test_gradients_match_reference(model):
    torch.manual_seed(2)
    ids = torch.randint(0, 97, (2, 10))
    prompt_lens = torch.tensor([3, 5])
    mask = torch.tensor([[1.0] * 7, [1.0] * 5 + [0.0] * 2], dtype=torch.float64)
    grads = []
    for fn in ("chunked", "reference"):
        model.zero_grad()
        if fn == "chunked":
            lp, _ = completion_logprobs(model, ids, torch.ones_like(ids), prompt_lens, 7, chunk_tokens=2)
        else:
            lp = sequence_logprobs_reference(model, ids, prompt_lens, 7)
        (lp * mask).sum().backward()
        grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-10)


def test_entropy_of_uniform_logits_is_log_vocab():
    lm = LlamaForCausalLM(
        LlamaConfig(
            vocab_size=50,
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=1,
            num_attention_heads=1,
            num_key_value_heads=1,
        )
    )
    torch.nn.init.zeros_(lm.lm_head.weight)  # all logits 0 -> uniform distribution
    ids = torch.randint(0, 50, (1, 6))
    lp, ent = completion_logprobs(lm, ids, torch.ones_like(ids), torch.tensor([2]), 4, with_entropy=True)
    assert torch.allclose(ent, torch.full_like(ent, torch.log(torch.tensor(50.0)).item()), atol=1e-5)
    assert torch.allclose(lp, torch.full_like(lp, -torch.log(torch.tensor(50.0)).item()), atol=1e-5)
