import { SharedLease, type Lease } from '../../../core/lease.js';
import type { Tensor } from '../../../core/tensor.js';
import type { ChildProcessHost } from './child.js';
import type { WireResponse } from './protocol.js';
import { readTensorGroups, type DeviceSlots } from './wire.js';

/** What reading a child's answer block needs of its host: the child's segments and the block hand-back. */
type BlockOwner = Pick<ChildProcessHost, 'peer' | 'freeLater'>;

/**
 * The tensors of a child message (one list per response) and, when they view the child's block (`lend`: every
 * request of the message took views), one lease share per response; otherwise the block is handed back now.
 * Throws INTERNAL naming `who` for a malformed message (the block is handed back then too).
 */
export function readChildAnswer(
  host: BlockOwner,
  blk: [number, number] | null | undefined,
  groups: readonly (WireResponse | null | undefined)[],
  slots: readonly DeviceSlots[],
  lend: boolean,
  who: string,
): { tensors: Tensor[][]; leases?: Lease[] } {
  let bytes = 0;
  let lent = false;
  try {
    const r = readTensorGroups(
      host.peer,
      blk,
      groups.map((g) => g?.o),
      who,
      slots,
      lend,
    );
    bytes = r.bytes;
    lent = r.lent;
    if (!lent || !blk) return { tensors: r.tensors };
    return { tensors: r.tensors, leases: lendBlock(host, blk, bytes, groups.length) };
  } finally {
    if (blk && !lent) host.freeLater(blk[0], blk[1], bytes);
  }
}

/** `count` shares of a child block the host's tensors view: handed back (and the mapping kept) until all released. */
function lendBlock(host: BlockOwner, blk: [number, number], bytes: number, count: number): Lease[] {
  host.peer.hold();
  const block = new SharedLease(count, () => {
    host.freeLater(blk[0], blk[1], bytes);
    host.peer.unhold();
  });
  return Array.from({ length: count }, () => block.share());
}
