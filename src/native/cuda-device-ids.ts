import { Nvml } from './nvml.js';

/**
 * The CUDA device ids this process may use: 0..n-1 over the GPUs CUDA shows it (CUDA_VISIBLE_DEVICES applied, as
 * CUDA renumbers them). Empty without a usable NVIDIA driver. Read once at start: instance groups are expanded
 * against it (KIND_AUTO → GPU, `gpus: [...]` checked).
 */
export async function cudaDeviceIds(): Promise<number[]> {
  const nvml = await Nvml.open();
  if (!(nvml instanceof Nvml)) return [];
  try {
    return nvml.devices.map((_, i) => i);
  } finally {
    await nvml.close();
  }
}
