"""Real timm and Hugging Face transformers models, tiny, raced on the CPU (image classification,
causal LM, masked LM) and built (seq2seq); their facts, and every way naming one can go wrong,
said clearly and without touching the network."""

import socket

import pytest
import torch
from support import CPU, require_model_libraries

from core.engine.models import sources as model_sources
from core.engine.models.workload import ModelError, describe_model, workload_for
from core.engine.reading import reading
from core.engine.spec import RunSpec, SpecError
from core.engine.trainer import run_race


@pytest.fixture(autouse=True)
def _libraries():
    require_model_libraries()


@pytest.fixture
def no_network(monkeypatch, tmp_path):
    """Any attempt to reach the network (a connection, or a name looked up first) is recorded and
    fails, with the Hub's offline switch off as on a visitor's box (the tests turn it on: conftest),
    so what keeps the code off the network is its own doing. huggingface_hub keeps what it fetched
    once per process and per day (its list of agents, asked for in every request's headers): both
    are set aside here, so each test asks afresh."""
    attempts = []

    def refuse(self, address):
        attempts.append(address)
        raise OSError("network disabled in tests")

    def no_lookup(host, *args, **kwargs):
        attempts.append(host)
        raise socket.gaierror("network disabled in tests")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", no_lookup)
    import huggingface_hub.constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "AGENT_HARNESSES_PATH", str(tmp_path / "agents.json"), raising=False)
    try:
        from huggingface_hub.utils import _detect_agent
    except ImportError:  # an older huggingface_hub asks for no such list
        return attempts
    monkeypatch.setattr(_detect_agent, "_registry", None, raising=False)
    return attempts


TINY_GPT2 = "hf:gpt2:n_layer=2,n_embd=32,n_head=2,n_positions=64,vocab_size=256,bos_token_id=0,eos_token_id=0"
TINY_BERT = (
    "hf:bert:num_hidden_layers=2,hidden_size=32,num_attention_heads=2,intermediate_size=64,vocab_size=256,"
    "max_position_embeddings=64"
)
TINY_T5 = "hf:t5:num_layers=1,num_decoder_layers=1,d_model=32,d_kv=16,num_heads=2,d_ff=64,vocab_size=256"


def race(model: str, **overrides):
    spec = RunSpec(model=model, batch_size=2, epochs=1, steps_per_epoch=3, backend="aot_eager", device="cpu")
    for key, value in overrides.items():
        spec = RunSpec(**{**spec.to_dict(), key: value})
    return run_race(spec, caps=CPU)


def assert_fair_race(result):
    """Both variants trained every step, from the same weights on the same batches."""
    assert result.status == "done", result.error
    assert len(result.eager.steps) == len(result.compiled.steps) == 3
    assert result.summary.compile_failed is None and result.summary.compile_skipped is None
    assert result.compile_stats.graphs >= 1
    assert result.eager.steps[0].loss == pytest.approx(result.compiled.steps[0].loss, rel=1e-4)
    assert result.eager.steps[0].samples == 2


def test_a_timm_model_races_at_the_input_size_of_its_pretrained_config():
    workload = workload_for(RunSpec(model="timm:test_resnet"))
    assert (workload.input_kind, workload.size, workload.task) == ("image", 160, "image-classification")
    result = race("timm:test_resnet")
    assert_fair_race(result)
    assert reading(result.summary)


def test_a_causal_language_model_races_on_next_token_targets():
    workload = workload_for(RunSpec(model=TINY_GPT2, image_size=16))
    inputs, target = workload.make_batch(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert inputs["input_ids"].shape == target.shape == (2, 16) and int(target.max()) < 256
    assert_fair_race(race(TINY_GPT2, image_size=16))


def test_a_masked_language_model_races_predicting_some_tokens():
    workload = workload_for(RunSpec(model=TINY_BERT, image_size=32))
    assert workload.task == "masked-lm"
    inputs, target = workload.make_batch(4, torch.Generator().manual_seed(0), torch.device("cpu"))
    predicted = target != -100
    assert predicted.any(dim=1).all() and predicted.float().mean() < 0.5  # about 15% of positions
    assert torch.equal(target[predicted], inputs["input_ids"][predicted])
    assert_fair_race(race(TINY_BERT, image_size=32))


def test_a_seq2seq_model_trains_with_teacher_forcing():
    workload = workload_for(RunSpec(model=TINY_T5, image_size=8))
    assert workload.task == "seq2seq"
    inputs, target = workload.make_batch(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert torch.equal(inputs["decoder_input_ids"][:, 1:], target[:, :-1])
    assert (inputs["decoder_input_ids"][:, 0] == 0).all()  # T5 starts decoding from its pad token
    model = workload.build()
    loss = workload.checked_step_loss(model, (inputs, target))
    loss.backward()
    assert 4 < loss.item() < 7  # about ln(256) from random weights


@pytest.mark.parametrize(
    ("model", "params", "task", "size"),
    [
        ("timm:convnext_small", 50_223_688, "image-classification", 224),  # timm's published count
        ("hf:gpt2", 124_439_808, "causal-lm", 128),  # GPT2LMHeadModel, tied embeddings
        ("hf:bert-base-uncased", 109_514_298, "masked-lm", 128),  # BertForMaskedLM
        ("hf:t5-small", 60_506_624, "seq2seq", 128),  # T5ForConditionalGeneration
    ],
)
def test_facts_before_launch_match_the_published_models(model, params, task, size, no_network):
    facts = describe_model(RunSpec(model=model))
    assert (facts["params"], facts["task"], facts["default_size"]) == (params, task, size)
    assert facts["summary"].startswith(f"{params / 1e6:,.2f} M parameters")
    assert no_network == []


def test_hf_sizes_come_from_the_configuration():
    facts = describe_model(RunSpec(model="hf:gpt2:n_positions=64"))
    assert facts["max_size"] == 64 and facts["default_size"] == 64 and facts["vocab_size"] == 50257
    roberta = describe_model(RunSpec(model="hf:roberta-base"))
    assert roberta["max_size"] == 512  # 514 positions, two taken by RoBERTa's padding offset
    with pytest.raises(ModelError, match="takes at most 64 tokens"):
        workload_for(RunSpec(model="hf:gpt2:n_positions=64", image_size=65))


def test_a_hugging_face_image_model_without_an_image_size_takes_imagenets():
    """ResNet's configuration has no image_size (a conv net takes any size): 224 by default, or as asked."""
    facts = describe_model(RunSpec(model="hf:resnet"))
    assert (facts["task"], facts["default_size"], facts["input"]) == ("image-classification", 224, "images 3x224x224")
    workload = workload_for(RunSpec(model="hf:resnet:embedding_size=8", image_size=32))
    batch = workload.make_batch(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert batch[0]["pixel_values"].shape == (2, 3, 32, 32)
    assert workload.checked_step_loss(workload.build(), batch).dim() == 0


def test_a_fixed_size_timm_model_is_built_at_the_asked_size():
    workload = workload_for(RunSpec(model="timm:test_vit", image_size=64))
    batch = workload.make_batch(2, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert batch[0].shape == (2, 3, 64, 64)
    assert workload.checked_step_loss(workload.build(), batch).dim() == 0


def test_an_unknown_timm_model_fails_before_any_step_with_a_search_hint():
    result = race("timm:not_a_model_at_all")
    assert result.status == "failed"
    assert "has no model 'not_a_model_at_all'" in result.error and "python -m core models --search" in result.error
    assert result.eager.steps == [] and result.compiled.steps == []


def test_a_configuration_not_on_this_machine_is_a_clear_message_and_no_download(no_network):
    with pytest.raises(ModelError) as caught:
        workload_for(RunSpec(model="hf:someone/private-model"))
    message = str(caught.value)
    assert "hf:someone/private-model is unknown here" in message and "not on this machine" in message
    assert "nothing was fetched" in message and "--download" in message
    assert "gpt2" in message and no_network == []


def test_describing_an_unknown_hugging_face_name_says_so_without_touching_the_network(no_network, capsys):
    from core.cli.main import main

    assert main(["models", "--describe", "hf:nobody/no-such-model"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: hf:nobody/no-such-model is unknown here") and len(err.strip().splitlines()) == 1
    assert no_network == []


def test_a_misspelt_setting_is_refused_with_the_settings_it_has():
    with pytest.raises(ModelError, match="has no setting 'n_lyer'; its settings include: .*n_layer"):
        workload_for(RunSpec(model="hf:gpt2:n_lyer=2"))


def test_a_model_type_without_a_head_to_train_says_what_can_race():
    with pytest.raises(ModelError, match="wav2vec2 models have no head Compile Lab trains"):
        workload_for(RunSpec(model="hf:wav2vec2"))


def test_a_missing_library_is_refused_before_any_work_with_how_to_install_it(monkeypatch):
    monkeypatch.setattr(model_sources, "library_version", lambda source: None)
    with pytest.raises(
        SpecError, match=r"timm package, which is not installed here \(pip install -r requirements-models.txt\)"
    ):
        race("timm:test_resnet")
    with pytest.raises(ModelError, match="transformers package"):  # and where a worker builds it
        workload_for(RunSpec(model="hf:gpt2"))


def test_varying_shapes_cut_a_hugging_face_batch_like_any_token_batch():
    from core.engine.variant import BatchSource

    spec = RunSpec(model=TINY_GPT2, image_size=16, shapes="varying", steps_per_epoch=4, batch_size=2, device="cpu")
    batches = list(BatchSource(spec, torch.device("cpu")).train_epoch(1))
    assert [x["input_ids"].shape[1] for x, _ in batches] == [16, 12, 8, 14]
    assert [y.shape[1] for _, y in batches] == [16, 12, 8, 14]
