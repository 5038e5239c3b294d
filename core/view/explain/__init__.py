"""The explainers' presentation (the Under the hood page), one module per demo as in
core.engine.explain, which measures them: charts, tables and readings from stored demo results,
pure, no Streamlit.

Every figure is shown with what it can stand for: fusion timings with the spread of their repeats
and the memory level they measure, a one-line reading under each experiment that follows from the
numbers (including "this machine does not show it, because ..."), never a claim the data contradicts.

  fusion     fusion and memory bandwidth: a chain of k elementwise ops, eager against fused
  overhead   per-op cost against the compiled call's fixed cost, and CUDA graphs
  graphs     graph capture and graph breaks, before and after the fix
  codegen    the code Inductor writes
  caches     where compile time goes, cold against warm cache, and recompiles on new shapes
  figures    what their charts share: fonts, the finish, the eager-against-compiled lines
"""
