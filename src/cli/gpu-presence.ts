import { Nvml } from '../native/nvml.js';

/**
 * Why this machine has no GPU a CUDA program could use, or undefined when NVML lists at least one that CUDA may
 * see. For commands whose every next step needs a GPU (building a TensorRT plan): said first, it spares the user
 * messages that point elsewhere (a 1 GB TensorRT set-up, CUDA's "driver version is insufficient" without a driver).
 */
export async function noGpuReason(env: NodeJS.ProcessEnv = process.env): Promise<string | undefined> {
  const nvml = await Nvml.open(undefined, env);
  if (!(nvml instanceof Nvml)) return nvml.reason;
  try {
    if (nvml.devices.length > 0) return undefined;
    if (nvml.allDevices.length > 0) {
      return `the NVIDIA driver sees ${nvml.allDevices.length} GPU(s), but CUDA_VISIBLE_DEVICES='${env.CUDA_VISIBLE_DEVICES ?? ''}' hides them all`;
    }
    return 'the NVIDIA driver sees no GPU';
  } finally {
    await nvml.close();
  }
}
