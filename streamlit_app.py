"""Compile Lab entry point. The interactive race page is coming; the engine and CLI are here."""

import streamlit as st

st.set_page_config(page_title="Compile Lab", page_icon="⚡", layout="wide")
st.title("Compile Lab")
st.markdown(
    """
See what `torch.compile` buys you: the compile overhead paid up front and the steady-state
speedup after it, measured on your own machine.

The browser app (launch a race, watch live charts) is being built. The measuring engine is
ready now from the command line:

```
python -m core models
python -m core race --model pointwise_mlp --device cpu
```
"""
)
