"""tritonclient's CUDA shared-memory flow, unchanged, against a running Nereid (scripts/gpu/cudashm-on-device.sh).

For HTTP and gRPC: create four device regions with tritonclient.utils.cuda_shared_memory (cuda-python), write the
inputs, register them, infer `simple_gpu` (a KIND_GPU onnxruntime model) with inputs AND outputs in CUDA shared
memory, read the outputs back from the device and compare with numpy, check status, a registration larger than its
allocation (refused), unregister, status empty. Prints one line per check and 'N passed, N failed' at the end.

Zero copy: Nereid's verbose log (argv[3]) has one line per onnxruntime run with client device memory, naming where
each tensor was ("inputs INPUT0 cuda:0, INPUT1 cuda:0; outputs OUTPUT0 cuda:0, OUTPUT1 cuda:0"). The flow checks
that simple_gpu read every input on the device and, from the second run of a shape on (the first learns the output
shapes), wrote its outputs there; that `simple_cpu` (KIND_CPU) got host copies (no such line) with the same
results; and that an input at a 64-byte offset (not 256-aligned) went through the host while the other stayed.

Process backends: `simple_torch` (pytorch KIND_GPU, TorchScript) and `simple_pydl` (python model.py KIND_GPU over DLPack,
FORCE_CPU_ONLY_INPUT_TENSORS "no") open the client's IPC handles in their own processes; their runner logs one line per
run ("pytorch run: inputs INPUT0 cuda:0, INPUT1 cuda:0; outputs OUTPUT0 cuda:0, OUTPUT1 cuda:0", "python run: ..."):
the flow checks every run read both inputs and wrote both outputs in the client's device memory.
"""

import sys
import time

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.cuda_shared_memory as cudashm
from tritonclient.utils import InferenceServerException

http_url, grpc_url = sys.argv[1], sys.argv[2]
log_path = sys.argv[3] if len(sys.argv) > 3 else None
passed = failed = 0
ALL_ON_DEVICE = "inputs INPUT0 cuda:0, INPUT1 cuda:0; outputs OUTPUT0 cuda:0, OUTPUT1 cuda:0"
INPUTS_ON_DEVICE = "inputs INPUT0 cuda:0, INPUT1 cuda:0; outputs"
MIXED = "inputs INPUT0 cuda:0, INPUT1 host;"


#: Engine whose run lines each model logs (the onnxruntime engine in-process, the others' runners in their processes).
ENGINE = {"simple_gpu": "onnxruntime", "simple_cpu": "onnxruntime", "simple_torch": "pytorch", "simple_pydl": "python"}


def run_lines(engine="onnxruntime"):
    """Nereid's log lines of an engine's runs with client device memory (the log is written synchronously)."""
    if log_path is None:
        return []
    time.sleep(0.2)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if f"{engine} run: inputs" in line]


def message_of(e):
    """The server's words in a tritonclient exception (its repr is empty)."""
    m = getattr(e, "message", None)
    return (m() if callable(m) else m) or str(e) or repr(e)


def check(what, ok, detail=""):
    global passed, failed
    passed, failed = passed + bool(ok), failed + (not ok)
    shown = "" if detail is None or (isinstance(detail, str) and detail == "") else f": {detail}"
    print(f"[cudashm] {'PASS' if ok else 'FAIL'} {what}{shown}", flush=True)


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
        zeros = np.zeros((1, 16), dtype=np.int32)
        for model in ("simple_gpu", "simple_cpu", "simple_torch", "simple_pydl"):
            seen = len(run_lines(ENGINE[model]))
            for i in range(3):  # the first run of a shape learns the output shapes; the next ones write in place
                cudashm.set_shared_memory_region(handles[2], [zeros])
                cudashm.set_shared_memory_region(handles[3], [zeros])
                try:
                    result = client.infer(model, inputs, outputs=outputs)
                except Exception as e:  # one model's failure is reported with the server's words; the others go on
                    check(f"{proto}: {model} infer {i} answered", False, message_of(e))
                    break
                out0 = cudashm.get_contents_as_numpy(handles[2], np.int32, [1, 16])
                out1 = cudashm.get_contents_as_numpy(handles[3], np.int32, [1, 16])
                what = f"{proto}: {model} infer {i}"
                check(f"{what}: OUTPUT0 = in0 + in1 read from the device", np.array_equal(out0, in0 + in1), out0)
                check(f"{what}: OUTPUT1 = in0 - in1 read from the device", np.array_equal(out1, in0 - in1), out1)
                o = result.get_output("OUTPUT0")
                check(f"{what}: the response names the output", o is not None)
            if log_path is None:
                continue
            lines = run_lines(ENGINE[model])[seen:]
            if model in ("simple_torch", "simple_pydl"):
                check(f"{proto}: {model} read both inputs and wrote both outputs in the client's device memory, in its own process (log)",
                      len(lines) == 3 and all(ALL_ON_DEVICE in l for l in lines), lines[-3:])
            elif model == "simple_gpu":
                check(f"{proto}: simple_gpu read every input on the device (log)",
                      sum(INPUTS_ON_DEVICE in l for l in lines) == 3, lines[-3:])
                check(f"{proto}: simple_gpu wrote both outputs on the device from its second run on (log)",
                      sum(ALL_ON_DEVICE in l for l in lines) >= 2, lines[-3:])
            else:
                check(f"{proto}: simple_cpu ran on host copies (no device run logged)", len(lines) == 0, lines[-3:])

        # One region holding both inputs, INPUT1 at offset 64: not 256-aligned, so it goes through the host.
        mixed_name = f"{proto}_mixed"
        mixed = cudashm.create_shared_memory_region(mixed_name, 512, 0)
        try:
            cudashm.set_shared_memory_region(mixed, [in0, in1])  # in1 lands at offset 64
            client.register_cuda_shared_memory(mixed_name, cudashm.get_raw_handle(mixed), 0, 512)
            mixed_in = [mod.InferInput("INPUT0", [1, 16], "INT32"), mod.InferInput("INPUT1", [1, 16], "INT32")]
            mixed_in[0].set_shared_memory(mixed_name, size)
            mixed_in[1].set_shared_memory(mixed_name, size, offset=size)
            cudashm.set_shared_memory_region(handles[2], [zeros])
            seen = len(run_lines())
            result = client.infer("simple_gpu", mixed_in, outputs=outputs)
            out0 = cudashm.get_contents_as_numpy(handles[2], np.int32, [1, 16])
            check(f"{proto}: a misaligned input still gives in0 + in1", np.array_equal(out0, in0 + in1), out0)
            if log_path is not None:
                lines = run_lines()[seen:]
                check(f"{proto}: the misaligned input went through the host, the other stayed (log)",
                      any(MIXED in l for l in lines), lines)
            client.unregister_cuda_shared_memory(mixed_name)
        finally:
            cudashm.destroy_shared_memory_region(mixed)

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
        check(f"{proto}: the flow ran to its end", False, message_of(e))
for engine in ("onnxruntime", "pytorch", "python"):
    for line in run_lines(engine)[:2]:
        print(f"[cudashm] log: {line[:300]}", flush=True)
print(f"{passed} passed, {failed} failed", flush=True)
sys.exit(1 if failed else 0)
