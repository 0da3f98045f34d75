"""Loading PyTorch with CUDA for the reference benches in this folder (torch_matmul.py,
torch_grouped_matmul.py, torch_matmul_coop.py), whose callers (kernels/bench/kernels.ts) read one JSON object on stdout:
a missing torch or GPU is reported as {"error": "..."} rather than a traceback.
"""
import json


def import_cuda_torch():
    """Returns the `torch` module when it imports and torch.cuda.is_available(); otherwise prints
    {"error": "<why>"} as one JSON line on stdout and returns None."""
    try:
        import torch
    except ImportError as e:
        print(json.dumps({"error": f"torch not importable: {e}"}))
        return None
    if not torch.cuda.is_available():
        print(json.dumps({"error": "torch.cuda.is_available() is False"}))
        return None
    return torch
