"""The most GPU memory in use while a block runs, as nvidia-smi reports it (the whole device, so tfm and
PyTorch are measured alike, caching allocators and CUDA contexts included):
    with PeakGpuMemory() as peak: ...
    peak.mib"""
import subprocess
import threading


class PeakGpuMemory:
    def __init__(self, every_seconds=0.2):
        self.every_seconds = every_seconds
        self.mib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self):
        while not self._stop.is_set():
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True).stdout
            if out.strip():
                self.mib = max(self.mib, int(out.split()[0]))
            self._stop.wait(self.every_seconds)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
