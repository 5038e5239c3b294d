"""The engine: everything that measures, and nothing that schedules or shows.

Owns RunSpec and its validation (spec), every model (the models package: the zoo's rows, model
sources, regional compile, the networks and each source's workload), batches (data),
device-correct timing (timing), the race itself (trainer: its schedules; variant: one variant's
training; device_state: what it sets on the device; failures: what went wrong, in words) and its
records (events, torch-free), the numbers a user decides on (analysis, pure), planning a real
training run, reading the regime and estimating a race's duration (planning, pure), torch's own
compile counters (compile_stats), the environment record
(environment) and the explainer demos (explain).

Must never import core.runs or core.view, Streamlit, Altair or pandas: it runs in worker
processes and in `python -m core race` on a bare GPU box that has only torch installed.
Modules that the app's process reads (spec, models.zoo, models.sources, models.regions, analysis,
planning, events, explain's registry) import no torch.
"""
