/**
 * The GPUs CUDA will show this process, from `CUDA_VISIBLE_DEVICES`, applied to NVML's list. Triton reports GPU
 * metrics for CUDA-visible GPUs only; NVML sees every GPU of the machine, so the list is filtered here.
 *
 * CUDA's rules: unset means every GPU; entries are separated by commas, each an index or a UUID (`GPU-…`, a unique
 * prefix is enough); the list ends at the first entry that names no GPU, so `""` or `-1` hides them all. An index is
 * matched against NVML's order, which is PCI bus order — CUDA's own order when `CUDA_DEVICE_ORDER=PCI_BUS_ID`, and
 * on the usual machine of identical GPUs the same as its default "fastest first"; UUIDs are exact in every case.
 */
export function visibleDevices<D extends { index: number; uuid: string }>(all: readonly D[], env?: string): D[] {
  if (env === undefined) return [...all];
  const out: D[] = [];
  for (const raw of env.split(',')) {
    const entry = raw.trim();
    let hit: D | undefined;
    if (/^\d+$/.test(entry)) hit = all.find((d) => d.index === Number(entry));
    else if (/^(GPU|MIG)-/i.test(entry)) {
      const matches = all.filter((d) => d.uuid.toLowerCase().startsWith(entry.toLowerCase()));
      hit = matches.length === 1 ? matches[0] : undefined;
    }
    if (!hit) break;
    if (!out.includes(hit)) out.push(hit);
  }
  return out;
}
