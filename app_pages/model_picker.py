"""The Race form's model selector: the zoo, timm (type-ahead over its names), Hugging Face (a text
box) or the visitor's own file (where the host allows it), with the model's parameters and input
shown before launch. UI only: what it offers and says is computed in core.view.race_form, and
facts come from lookup jobs (core.runs.model_catalog), so this process never imports torch.

The chosen model lives in st.session_state.form_model (and form_model_file), like every field of
the form; the widgets here follow it and write it back when the visitor changes them.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from app_pages.common import store, tick, visitor, visitor_address
from core.engine.models.sources import default_batch_size, source_of
from core.engine.spec import Problem
from core.runs.limits import HostLimits
from core.runs.model_catalog import Lookup, lookup_model, model_names, save_model_file
from core.view import race_form
from core.view.safe_text import markdown_text


def _choose(model: str, model_file: str | None = None) -> None:
    st.session_state.form_model = model
    st.session_state.form_model_file = model_file
    st.session_state.form_batch_size = default_batch_size(model)


def _switch_source(limits: HostLimits) -> None:
    source = st.session_state.pick_source
    if source == "file":
        _choose(*st.session_state.get("uploaded_model", (race_form.DEFAULT_MODEL["file"], None)))
    else:
        _choose(race_form.default_model(source, limits, st.session_state.get("timm_names")))


def _set(key: str, value) -> None:
    if st.session_state.get(key) != value:
        st.session_state[key] = value


SOURCE_HELP = (
    "Where the model comes from: the zoo's small models (quick on a CPU), timm's image models, a Hugging Face "
    "name, or your own Python file where this host allows it."
)


def model_picker(column, limits: HostLimits, help_text: str | None = None) -> list[Problem]:
    """Draw the selector in `column` (`help_text`: the model select's help); returns problems that
    must block launch (a failed lookup)."""
    problems = _picker(column, limits, help_text)
    st.session_state.picker_model = st.session_state.get("form_model")
    return problems


def _picker(column, limits: HostLimits, help_text: str | None = None) -> list[Problem]:
    model = st.session_state.get("form_model", "pointwise_mlp")
    # The widgets follow form_model when something else set it (first render, a link, a preset, a
    # callback); otherwise they keep what the visitor typed, even a name that is not valid yet.
    follow = st.session_state.get("picker_model") != model
    sources = race_form.sources_offered(limits) or ["zoo"]
    source = source_of(model)
    if follow or st.session_state.get("pick_source") not in sources:
        _set("pick_source", source if source in sources else sources[0])
    column.radio(
        "Model from",
        sources,
        format_func=race_form.SOURCE_LABELS.get,
        key="pick_source",
        horizontal=True,
        help=SOURCE_HELP,
        on_change=_switch_source,
        args=(limits,),
    )
    source = st.session_state.pick_source
    note = race_form.source_note(source)
    if note:
        column.info(note)
        return [Problem("model", note)]
    if source == "zoo":
        options = race_form.zoo_options(limits) or ["pointwise_mlp"]
        if follow or st.session_state.get("pick_zoo") not in options:
            _set("pick_zoo", model if model in options else options[0])
        column.selectbox(
            "Model",
            options,
            format_func=race_form.zoo_label,
            key="pick_zoo",
            help=help_text,
            on_change=lambda: _choose(st.session_state.pick_zoo),
        )
        _choose_quietly(st.session_state.pick_zoo)
        return []
    if source == "timm":
        asker = {"asker": visitor(), "address": visitor_address(limits)}  # the cap on one visitor's waiting lookups
        listing = model_names(store(), "timm", limits, **asker)
        if listing.state == "pending":
            _wait_for(column, "Reading timm's model list…", lambda: model_names(store(), "timm", limits, **asker))
            return []
        if listing.state != "ready":
            column.error(markdown_text(listing.message))
            return [Problem("model", listing.message)]
        st.session_state.timm_names = listing.names
        options = race_form.library_options(listing.names, limits)
        if not options:
            return [Problem("model", "this host allows none of timm's models")]
        if follow or st.session_state.get("pick_timm") not in options:
            _set("pick_timm", model if model in options else options[0])
        column.selectbox(
            f"timm model ({len(options):,}; type to search)",
            options,
            key="pick_timm",
            help=help_text,
            on_change=lambda: _choose(st.session_state.pick_timm),
        )
        _choose_quietly(st.session_state.pick_timm)
    elif source == "hf":
        if follow or "pick_hf" not in st.session_state:
            _set("pick_hf", model.removeprefix("hf:") if source_of(model) == "hf" else "gpt2")
        column.text_input("Hugging Face model", key="pick_hf", help=race_form.hf_help())
        typed, problem = race_form.hf_model_from_text(st.session_state.pick_hf)
        if problem:
            column.caption(markdown_text(problem))  # it quotes what was typed
            return [Problem("model", problem)]
        _choose_quietly(typed)
    else:
        column.caption("Runs your file's code in the worker: build_model(), optionally example_batch() and loss().")
        upload = column.file_uploader("Model file (.py)", type=["py"], key="pick_file", help=help_text)
        if upload is not None:
            try:
                chosen = save_model_file(upload.getvalue(), upload.name)
            except ValueError as exc:
                column.error(markdown_text(f"{upload.name}: {exc}"))
                return [Problem("model_file", str(exc))]
            st.session_state.uploaded_model = chosen
            _choose_quietly(*chosen)
        elif not st.session_state.get("form_model_file"):
            return []  # validation says a file is needed
    return _show_facts(column, limits)


def _choose_quietly(model: str, model_file: str | None = None) -> None:
    """Record the model the widgets show, keeping the batch size the visitor set."""
    st.session_state.form_model = model
    st.session_state.form_model_file = model_file


def _show_facts(column, limits: HostLimits) -> list[Problem]:
    model, model_file = st.session_state.form_model, st.session_state.get("form_model_file")
    asker = {"asker": visitor(), "address": visitor_address(limits)}  # the cap on one visitor's waiting lookups
    lookup = lookup_model(store(), model, model_file, limits, **asker)
    kind, text = race_form.facts_line(lookup, store())
    # A lookup's answer can carry a name from a link (hf:www.example.com/x) or a model file's exception text.
    if kind == "ok":
        column.caption(markdown_text(text))
    elif kind == "wait":  # launch need not wait: the worker checks the model again before timing it
        _wait_for(column, text, lambda: lookup_model(store(), model, model_file, limits, **asker))
    elif kind == "error":
        column.error(markdown_text(text))
        return [Problem("model", text)]
    else:
        column.info(markdown_text(text))
    return []


def _wait_for(column, text: str, ask: Callable[[], Lookup]) -> None:
    """Say what is being looked up, and redraw the page once a worker has stored the answer."""
    column.caption(markdown_text(text))

    @st.fragment(run_every=1.0)
    def _poll() -> None:
        tick()
        if ask().state != "pending":
            st.rerun()

    _poll()
