"""The engine: everything that measures, and nothing that schedules or shows.

Owns RunSpec and its validation (spec), the model registry (zoo, torch-free) and the networks
(models), what regional compile compiles (regions), batches (data), device-correct timing
(timing), the race itself (trainer: its schedules; variant: one variant's training; device_state:
what it sets on the device; failures: what went wrong, in words) and its records (events, torch-free),
the numbers a user decides on (analysis, pure), planning a real training run and reading the regime
(planning, pure), torch's own compile counters (compile_stats), the environment record
(environment) and the explainer demos (explain).

Must never import core.runs or core.view, Streamlit, Altair or pandas: it runs in worker
processes and in `python -m core race` on a bare GPU box that has only torch installed.
Modules that the app's process reads (spec, zoo, regions, analysis, planning, events, explain's registry)
import no torch.
"""
