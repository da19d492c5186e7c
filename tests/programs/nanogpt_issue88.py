"""karpathy/nanoGPT issue #88 (a comment of 2023-03-08): ``python train.py --batch_size=32
--compile=False`` on one 16 GB GPU (15.78 GiB total capacity) stops with
"CUDA out of memory. Tried to allocate 6.14 GiB (GPU 0; 15.78 GiB total capacity; 10.16 GiB
already allocated; ...)". Runs this corpus's nanoGPT train.py (GPT-2 124M defaults, block
size 1024, float16 autocast where bf16 is unsupported, as on a V100) with that command line.

GPU: torch.OutOfMemoryError in the first estimate_loss(): the float32 copy of the
(32 x 1024 x 50304) logits that F.cross_entropy takes under autocast. The simulated
"Tried to allocate" and allocated bytes are compared with the issue's in
benchmarks/programs.py --issue88 (README "Real programs").
Source: https://github.com/karpathy/nanoGPT/issues/88
"""

import os
import runpy
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.argv = [os.path.join(here, "nanogpt_train.py"), "--batch_size=32", "--compile=False"]
runpy.run_path(sys.argv[0], run_name="__main__")

EXPECT = {
    "gpu": "V100-SXM2-16GB",
    "values": ["placeholder"],
    "exit": 1,
    "error": {
        "type": "OutOfMemoryError",
        "message": r"CUDA out of memory\. Tried to allocate 6\.\d\d GiB.*",
    },
}
