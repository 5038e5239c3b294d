"""Model names from every source, checked without torch: their syntax, what a spec allows with them,
host limits with patterns and uploads, the form's choices, and links carrying them."""

import pytest
from support import CPU

from core.engine.models import sources as model_sources
from core.engine.models.sources import (
    ModelName,
    default_file_model_name,
    describe_facts,
    model_file_source_problem,
    model_name_problem,
    parse_model_name,
    source_of,
)
from core.engine.spec import RunSpec, validate
from core.runs.limits import CUSTOM_MODELS_OFF, HostLimits, load_host_limits, model_allowed
from core.view.race_form import (
    default_model,
    hf_model_from_text,
    library_options,
    source_note,
    sources_offered,
    spec_from_query,
    spec_to_query,
    zoo_options,
)


@pytest.mark.parametrize(
    ("text", "source", "name", "overrides"),
    [
        ("resnet50", "zoo", "resnet50", {}),
        ("timm:convnext_small", "timm", "convnext_small", {}),
        ("timm:resnet18.a1_in1k", "timm", "resnet18.a1_in1k", {}),
        ("timm:vit_tiny_patch16_224:drop_path_rate=0.1", "timm", "vit_tiny_patch16_224", {"drop_path_rate": 0.1}),
        ("hf:gpt2", "hf", "gpt2", {}),
        ("hf:google-bert/bert-base-uncased", "hf", "google-bert/bert-base-uncased", {}),
        (
            "hf:gpt2:n_layer=2,n_embd=64,scale_attn_weights=false",
            "hf",
            "gpt2",
            {"n_layer": 2, "n_embd": 64, "scale_attn_weights": False},
        ),
        ("hf:t5-small:layer_norm_epsilon=1e-5", "hf", "t5-small", {"layer_norm_epsilon": 1e-5}),
        ("file:my_net.py", "file", "my_net.py", {}),
    ],
)
def test_model_names_of_every_source_parse(text, source, name, overrides):
    parsed = parse_model_name(text)
    assert (parsed.source, parsed.name, parsed.overrides) == (source, name, overrides)
    assert source_of(text) == source
    assert parsed.text == text.replace("1e-5", "1e-05")  # numbers are written back as Python does


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("nope", "allowed: mlp"),
        ("timm:", "not a timm model name"),
        ("timm:bad name", "not a timm model name"),
        ("hf:../../etc/passwd", "not a hf model name"),
        ("hf:/abs/path", "not a hf model name"),
        ("hf:gpt2:n_layer", "key=value"),
        ("hf:gpt2:n_layer=two", "must be a number, true or false"),
        ("hf:gpt2:Bad-Key=1", "key=value"),
        ("file:model.txt", "not a model file name"),
        ("file:x.py:a=1", "not a model file name"),
        (None, "must be a model name"),
    ],
)
def test_bad_model_names_say_what_is_allowed(text, says):
    assert says in model_name_problem(text)


def test_a_name_with_too_many_settings_is_refused():
    settings = ",".join(f"k{i}=1" for i in range(model_sources.MAX_OVERRIDES + 1))
    assert "at most" in model_name_problem(f"hf:gpt2:{settings}")


def test_model_name_text_round_trips():
    name = ModelName("hf", "gpt2", {"n_layer": 2, "tie_word_embeddings": True})
    assert parse_model_name(name.text) == name


def test_a_spec_takes_library_models_by_name_and_checks_their_syntax_only():
    assert validate(RunSpec(model="timm:convnext_small", batch_size=8), CPU) == []
    assert validate(RunSpec(model="hf:bert-base-uncased", batch_size=8, image_size=64), CPU) == []
    problems = validate(RunSpec(model="timm:no such", image_size=0))
    assert {p.field for p in problems} == {"model"}  # image_size is not judged for a model that is not one


def test_a_spec_checks_the_input_size_range_and_the_data_source_for_library_models():
    problems = validate(RunSpec(model="hf:gpt2", image_size=0, data="fakedata"), CPU)
    assert {p.field for p in problems} == {"image_size", "data"}
    assert "choose synthetic data" in [p.message for p in problems if p.field == "data"][0]
    assert validate(RunSpec(model="timm:resnet18", data="fakedata"), CPU) == []  # timm models take images


def test_a_file_model_needs_its_file_and_only_it_takes_one(tmp_path):
    path = tmp_path / "net.py"
    assert [p.field for p in validate(RunSpec(model="file:net.py"))] == ["model_file"]
    assert "--model-file" in validate(RunSpec(model="file:net.py"))[0].message
    assert [p.field for p in validate(RunSpec(model="mlp", model_file=str(path)))] == ["model_file"]
    missing = validate(RunSpec(model="file:net.py", model_file=str(path)), CPU)
    assert [p.message for p in missing] == [f"no such file: {path}"]
    assert validate(RunSpec(model="file:net.py", model_file=str(path))) == []  # without caps: another machine's run
    path.write_text("def build_model():\n    pass\n")
    assert validate(RunSpec(model="file:net.py", model_file=str(path)), CPU) == []


def test_varying_shapes_are_refused_for_a_model_files_own_batches(tmp_path):
    problems = validate(RunSpec(model="file:net.py", model_file=str(tmp_path / "net.py"), shapes="varying"))
    assert [p.field for p in problems] == ["shapes"]
    assert validate(RunSpec(model="hf:gpt2", shapes="varying")) == []


def test_a_missing_library_is_a_problem_with_the_install_command(monkeypatch):
    monkeypatch.setattr(model_sources, "library_version", lambda source: None)
    problems = validate(RunSpec(model="timm:resnet18"), CPU)
    assert [p.field for p in problems] == ["model"]
    assert "timm package, which is not installed here (pip install -r requirements-models.txt)" in problems[0].message
    assert validate(RunSpec(model="timm:resnet18")) == []  # bundle import: no machine, no library needed
    assert "transformers" in validate(RunSpec(model="hf:gpt2"), CPU)[0].message


def test_library_versions_are_read_without_importing_the_library():
    import sys

    imported = "timm" in sys.modules
    assert model_sources.library_version("timm")  # installed for these tests (requirements-models.txt)
    assert ("timm" in sys.modules) == imported
    assert model_sources.library_version("zoo") is None and model_sources.library_problem("zoo") is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("import torch\ndef build_model():\n    return torch.nn.Linear(2, 2)\n", None),
        ("from nets import build_model\n", None),
        ("build_model = lambda: None\n", None),
        ("def build_model(:\n", "not valid Python (line 1"),
        ("def make():\n    pass\n", "defines no build_model()"),
        ("def outer():\n    def build_model():\n        pass\n", "defines no build_model()"),
        ("x = '\0'\n", "not valid Python"),
    ],
)
def test_a_model_files_text_is_checked_before_anything_runs_it(text, problem):
    found = model_file_source_problem(text)
    assert found == problem if problem is None else problem in found


def test_a_file_models_name_is_made_safe_to_show():
    assert default_file_model_name("/home/me/nets/my net<script>.py") == "file:my_net_script_.py"
    assert default_file_model_name("C:\\models\\resnet.py") == "file:resnet.py"
    assert default_file_model_name(".py") == "file:model.py"
    assert model_name_problem(default_file_model_name("../../weird\n name.py")) is None


def test_facts_read_as_one_line():
    facts = {"params": 50_223_688, "input": "images 3x224x224", "task": "image-classification"}
    assert describe_facts(facts) == "50.22 M parameters; images 3x224x224; image classification"


# -- host limits --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patterns", "model", "allowed"),
    [
        (("timm:*",), "timm:convnext_small", True),
        (("timm:*",), "hf:gpt2", False),
        (("timm:*",), "mlp", False),
        (("timm:convnext_*", "resnet50"), "timm:convnext_small", True),
        (("timm:convnext_*", "resnet50"), "timm:resnet50", False),
        (("timm:convnext_*", "resnet50"), "resnet50", True),
        (("hf:gpt2*",), "hf:gpt2-medium", True),
        (("hf:gpt2*",), "hf:bert-base-uncased", False),
        (("*",), "hf:anything", True),
        (None, "timm:anything", True),
    ],
)
def test_allowed_models_takes_names_and_patterns(patterns, model, allowed):
    assert model_allowed(patterns, model) is allowed
    problems = HostLimits(allowed_models=patterns).problems(RunSpec(model=model))
    assert (problems == []) is allowed


def test_model_files_are_refused_unless_the_host_allows_them():
    spec = RunSpec(model="file:net.py", model_file="/tmp/net.py")
    refused = HostLimits().problems(spec)
    assert [p.message for p in refused] == [CUSTOM_MODELS_OFF] and "allow_custom_models" in CUSTOM_MODELS_OFF
    assert HostLimits(allow_custom_models=True).problems(spec) == []
    assert HostLimits(allow_custom_models=True, allowed_models=("timm:*",)).problems(spec) != []


def test_allow_custom_models_reads_from_the_environment_and_a_file(tmp_path):
    assert load_host_limits({}).allow_custom_models is False
    assert load_host_limits({"COMPILE_LAB_ALLOW_CUSTOM_MODELS": "true"}).allow_custom_models is True
    assert load_host_limits({"COMPILE_LAB_ALLOW_CUSTOM_MODELS": "0"}).allow_custom_models is False
    config = tmp_path / "limits.toml"
    config.write_text('[limits]\nallow_custom_models = true\nallowed_models = ["timm:*", "mlp"]\n')
    limits = load_host_limits({"COMPILE_LAB_CONFIG": str(config)})
    assert limits.allow_custom_models is True and limits.allowed_models == ("timm:*", "mlp")
    with pytest.raises(ValueError, match="(?i)allow_custom_models must be true or false"):
        load_host_limits({"COMPILE_LAB_ALLOW_CUSTOM_MODELS": "perhaps"})


# -- the form's choices ---------------------------------------------------------------------------


def test_the_form_offers_sources_the_host_allows():
    assert sources_offered(HostLimits()) == ["zoo", "timm", "hf"]  # no uploads by default
    assert sources_offered(HostLimits(allow_custom_models=True)) == ["zoo", "timm", "hf", "file"]
    assert sources_offered(HostLimits(allowed_models=("timm:*",))) == ["timm"]
    assert sources_offered(HostLimits(allowed_models=("mlp", "hf:gpt2"))) == ["zoo", "hf"]
    assert zoo_options(HostLimits(allowed_models=("mlp", "hf:gpt2"))) == ["mlp"]
    names = ["timm:convnext_small", "timm:resnet18"]
    assert library_options(names, HostLimits(allowed_models=("timm:convnext*",))) == names[:1]
    assert default_model("timm", HostLimits(allowed_models=("timm:convnext*",)), names) == names[0]
    assert default_model("timm", HostLimits(), names) == "timm:resnet18"


def test_a_typed_hugging_face_name_becomes_a_model_or_says_why_not():
    assert hf_model_from_text(" bert-base-uncased ") == ("hf:bert-base-uncased", None)
    assert hf_model_from_text("hf:gpt2:n_layer=2") == ("hf:gpt2:n_layer=2", None)
    model, problem = hf_model_from_text("")
    assert model is None and "gpt2" in problem
    model, problem = hf_model_from_text("../secret")
    assert model is None and "not a hf model name" in problem


def test_a_missing_library_is_explained_where_the_source_is_chosen(monkeypatch):
    assert source_note("timm") is None
    monkeypatch.setattr(model_sources, "library_version", lambda source: None)
    note = source_note("hf")
    assert note.startswith("Hugging Face models need the transformers package") and "requirements-models.txt" in note


def test_links_carry_library_models_but_never_a_file():
    restored, notes = spec_from_query({"model": "timm:convnext_small"}, RunSpec())
    assert restored.model == "timm:convnext_small" and notes == []
    restored, notes = spec_from_query({"model": "file:net.py"}, RunSpec())
    assert restored.model == RunSpec().model and [n.text for n in notes] == [
        "ignored model='file:net.py' from the link"
    ]
    assert "model" not in spec_to_query(RunSpec(model="file:net.py", model_file="/x/net.py"))
    assert spec_to_query(RunSpec(model="hf:gpt2:n_layer=2"))["model"] == "hf:gpt2:n_layer=2"
