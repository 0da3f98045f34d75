"""CUDA-event timing shared by the PyTorch reference benches in this folder (torch_matmul.py,
torch_grouped_matmul.py, torch_matmul_coop.py) and core/bench/torch_attention.py. Imported as
`from cuda_timing import ...`: Python puts the running script's folder first on sys.path
(torch_attention.py adds this folder). `torch` is passed in, so a bench can report a
missing PyTorch itself before importing it.

Times are CUDA-event elapsed times (torch.cuda.Event(enable_timing=True), recorded on the current
stream around back-to-back calls and read after torch.cuda.synchronize()), in seconds.
"""
import statistics


def warm_up(fn, torch, calls=3):
    """Runs `fn` `calls` times and waits for the GPU."""
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()


def one_call_seconds(fn, torch):
    """CUDA-event time of a single call of `fn` in seconds, at least 1e-6 (a probe for sizing
    the timed batches)."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return max(start.elapsed_time(end) / 1e3, 1e-6)


def seconds_per_call(fn, torch, reps, trials):
    """Median over `trials` trials of the CUDA-event time of `reps` back-to-back calls of `fn`,
    divided by `reps`, in seconds. No warm-up of its own (see warm_up)."""
    out = []
    for _ in range(trials):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end) / 1e3 / reps)
    return statistics.median(out)
