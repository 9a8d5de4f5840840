"""tritonclient's CUDA shared-memory flow, unchanged, against a running Nereid (scripts/gpu/cudashm-on-device.sh).

For HTTP and gRPC: create four device regions with tritonclient.utils.cuda_shared_memory (cuda-python), write the
inputs, register them, infer `simple_gpu` (a KIND_GPU onnxruntime model) with inputs AND outputs in CUDA shared
memory, read the outputs back from the device and compare with numpy, check status, a registration larger than its
allocation (refused), unregister, status empty. Prints one line per check and 'N passed, N failed' at the end.
"""

import sys

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.cuda_shared_memory as cudashm
from tritonclient.utils import InferenceServerException

http_url, grpc_url = sys.argv[1], sys.argv[2]
passed = failed = 0


def check(what, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    print(f"[cudashm] {'PASS' if ok else 'FAIL'} {what}{(': ' + str(detail)) if detail else ''}", flush=True)


def flow(proto, mod, url):
    client = mod.InferenceServerClient(url)
    client.unregister_cuda_shared_memory()
    in0 = np.arange(16, dtype=np.int32).reshape(1, 16)
    in1 = np.full((1, 16), 3, dtype=np.int32)
    size = in0.nbytes
    names = [f"{proto}_{n}" for n in ("in0", "in1", "out0", "out1")]
    handles = [cudashm.create_shared_memory_region(n, size, 0) for n in names]
    try:
        cudashm.set_shared_memory_region(handles[0], [in0])
        cudashm.set_shared_memory_region(handles[1], [in1])
        for n, h in zip(names, handles):
            client.register_cuda_shared_memory(n, cudashm.get_raw_handle(h), 0, size)
        status = client.get_cuda_shared_memory_status()
        listed = sorted(r["name"] for r in status) if proto == "http" else sorted(status.regions.keys())
        check(f"{proto}: status lists the four regions", listed == sorted(names), listed)

        inputs = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
        inputs[0].set_shared_memory(names[0], size)
        inputs[1].set_shared_memory(names[1], size)
        kw = {"binary_data": True} if proto == "http" else {}
        outputs = [mod.InferRequestedOutput("OUTPUT0", **kw), mod.InferRequestedOutput("OUTPUT1", **kw)]
        outputs[0].set_shared_memory(names[2], size)
        outputs[1].set_shared_memory(names[3], size)
        for i in range(3):  # the first run also records output shapes; the next ones take other paths
            result = client.infer("simple_gpu", inputs, outputs=outputs)
            out0 = cudashm.get_contents_as_numpy(handles[2], "INT32", [1, 16])
            out1 = cudashm.get_contents_as_numpy(handles[3], "INT32", [1, 16])
            check(f"{proto}: infer {i}: OUTPUT0 = in0 + in1 read from the device", np.array_equal(out0, in0 + in1), out0)
            check(f"{proto}: infer {i}: OUTPUT1 = in0 - in1 read from the device", np.array_equal(out1, in0 - in1), out1)
            o = result.get_output("OUTPUT0")
            check(f"{proto}: infer {i}: the response names the output", o is not None)

        try:
            client.register_cuda_shared_memory(f"{proto}_big", cudashm.get_raw_handle(handles[0]), 0, 1 << 30)
            check(f"{proto}: a registration larger than its allocation is refused", False, "registered")
        except InferenceServerException as e:
            check(f"{proto}: a registration larger than its allocation is refused", "invalid args" in str(e), e)
        try:
            bad = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
            bad[0].set_shared_memory(names[0], size, offset=4)
            bad[1].set_shared_memory(names[1], size)
            client.infer("simple_gpu", bad)
            check(f"{proto}: a slice past the region is refused", False, "accepted")
        except InferenceServerException as e:
            check(f"{proto}: a slice past the region is refused", "Invalid offset + byte size" in str(e), e)

        client.unregister_cuda_shared_memory(names[0])
        client.unregister_cuda_shared_memory()
        status = client.get_cuda_shared_memory_status()
        empty = (status == []) if proto == "http" else (len(status.regions) == 0)
        check(f"{proto}: unregister leaves status empty", empty, status)
    finally:
        for h in handles:
            cudashm.destroy_shared_memory_region(h)
        client.close()


for proto, mod, url in (("http", httpclient, http_url), ("grpc", grpcclient, grpc_url)):
    try:
        flow(proto, mod, url)
    except Exception as e:  # a failure of the flow itself is one failed check, and the next protocol still runs
        check(f"{proto}: the flow ran to its end", False, repr(e))
print(f"{passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
