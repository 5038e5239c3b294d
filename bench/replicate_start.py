"""What a replicate process does before its first timed step, as an entry point that
bench/launch_latency.py starts cold (`python -m bench.replicate_start`) or forks from a warm server
(core.runs.warm_start): the default CPU race's model built and its weights kept, its batches, the
warm-up step every fresh process pays, then one timed eager step. Prints one JSON line of wall-clock
times: entered (the entry point runs), first_step (the timed step starts), first_step_end."""

from __future__ import annotations

import copy
import json
import sys
import time

ENTERED = time.time()  # a cold start imports this module first: its imports below are the start's cost


def main(argv: list[str] | None = None) -> int:
    entered = ENTERED if __name__ == "__main__" else time.time()
    import torch

    from core.engine.data import BatchSource
    from core.engine.models.resolve import workload_for
    from core.engine.spec import RunSpec
    from core.engine.variant import VariantRun, warm_up_device

    # The Race page's default CPU race (core.view.race_form.default_spec), built here without the view.
    spec = RunSpec(model="pointwise_mlp", batch_size=4096, epochs=3, steps_per_epoch=100, device="cpu")
    device = torch.device("cpu")
    workload = workload_for(spec)
    torch.manual_seed(spec.seed)
    model = workload.build()
    initial = copy.deepcopy(model.state_dict())
    del model
    warm_up_device(spec, device, initial, workload)
    run = VariantRun("eager", spec, device, initial, lambda event: None, workload)
    run.model.train()
    source = BatchSource(spec, device, workload)
    x, y = next(iter(source.train_epoch(1)))
    first = time.time()
    run.train_step(x, y)
    print(json.dumps({"entered": entered, "first_step": first, "first_step_end": time.time()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
