"""A workload trained with Hugging Face Accelerate in one process: the model,
data and batch size of the plain PyTorch twin (<program>.py's build()), its
loader and step (common.py), with accelerator.prepare and
accelerator.backward in place of moving things to the device and
loss.backward(). bench/gpu/harness.py runs it next to the twin and accel.
    python3 bench/python/accelerate_run.py digits_mlp|cnn|char_lm [warmup window windows]
"""
import importlib
import sys

import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration

import common


def run(program):
    # Non-blocking copies from the loader's pinned memory, as the twin and accel make them.
    accelerator = Accelerator(cpu=common.DEVICE.type == "cpu",
                              dataloader_config=DataLoaderConfiguration(non_blocking=True))
    common.setup()  # after Accelerator(), so that its thread count and seed are the twin's
    model, x, y, batch_size = importlib.import_module(program).build()
    sampler, batches = common.loader(x, y, batch_size, 0, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, opt, batches = accelerator.prepare(model, opt, batches)
    common.train(sampler, batches, common.step(model, opt, accelerator.backward),
                 accelerator.process_index, accelerator.num_processes, common.config(sys.argv[2:]))


if __name__ == "__main__":
    run(sys.argv[1])
