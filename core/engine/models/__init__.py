"""Every model a race can train, in one package: where each file holds one part of it.

- zoo: the zoo's rows, one keyword row per model (its builder, input, defaults, regional block,
  CPU estimates, demo use); torch-free.
- sources: where a model comes from (zoo, timm:, hf:, file:), one row per source naming the
  module that builds its workload (imported only when used); names and their syntax; torch-free.
- regions: what regional compile compiles, read from the rows (torch-free until a model is built).
- networks: the zoo's networks (torch) and `build_model`.
- workload: the floor every source builds on (Workload, ModelError, the loss, `stage`); imports
  no source.
- zoo_workload, library_models (timm, transformers), model_file: one workload per source.
- resolve: `workload_for` and `describe_model`, through the sources table.

Importing this package imports nothing: the app's process reads the torch-free modules only.
"""
