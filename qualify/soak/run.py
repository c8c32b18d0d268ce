"""A whole soak: every role's server started, its blocks run in the planned order, its files saved.

The order comes from `qualify.soak.blocks`; what happens within one role's block is
`qualify.soak.role`. One after the other, one server is up at a time; interleaved, both are up
for the whole soak so that each keeps its memory, and any leak, across its blocks; concurrent,
every role is loaded at once for the whole duration, each from its own thread.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

from qualify.core.context import CheckContext
from qualify.core.progress import Progress
from qualify.soak.blocks import Block, plan_blocks
from qualify.soak.role import RoleSoak, SoakSettings
from qualify.soak.workload import Request


def soak_roles(ctx: CheckContext, requests: list[Request], settings: SoakSettings) -> None:
    """Run every role's soak in the planned order and save each role's files."""
    roles = tuple(ctx.roles)
    blocks = plan_blocks(roles, settings.duration_s, 0.0 if settings.concurrent else settings.block_s)
    t_start = time.monotonic()
    interleaved = blocks[0].count > 1
    schedule = "concurrent" if settings.concurrent else "interleaved" if interleaved else "sequential"
    soaks = {role: RoleSoak(ctx, role, requests, settings, t_start, schedule) for role in roles}
    if settings.concurrent:
        _concurrent(ctx, soaks, blocks)
        return
    if not interleaved:
        for role in roles:  # one server at a time
            with ExitStack() as stack:
                soaks[role].start(stack)
                if soaks[role].running:
                    _tell(ctx, blocks, blocks[roles.index(role)])
                    soaks[role].run_block(blocks[roles.index(role)])
                soaks[role].finish()
            soaks[role].save()
        return
    with ExitStack() as stack:
        for role in roles:
            soaks[role].start(stack)
        for block in blocks:
            if soaks[block.role].running:
                _tell(ctx, blocks, block)
                soaks[block.role].run_block(block)
        for soak in soaks.values():
            soak.finish()
    for soak in soaks.values():
        soak.save()


def _concurrent(ctx: CheckContext, soaks: dict[str, RoleSoak], blocks: list[Block]) -> None:
    """Every server up, then every role's single block at once: the soak takes one duration
    instead of one per role. The servers start one after the other (their start-up is not
    what is measured), and the clocks of all roles start together when the last is ready."""
    with ExitStack() as stack:
        # The pool is closed after the servers are stopped (the stack unwinds in reverse): when
        # the run is interrupted, or one role's thread raises, the other threads see their
        # servers gone within a second and end, rather than loading them to the end.
        pool = stack.enter_context(ThreadPoolExecutor(len(blocks), thread_name_prefix="soak"))
        for soak in soaks.values():
            soak.start(stack)
        running = [b for b in blocks if soaks[b.role].running]
        if running:
            ctx.advance(Progress(", ".join(b.role for b in running), left_s=running[0].end_s))
            start = time.monotonic()
            for block in running:
                soaks[block.role].t_start = start
            futures = [pool.submit(soaks[b.role].run_block, b) for b in running]
            for future in futures:
                future.result()  # a harness error in one role is raised, not lost
        for soak in soaks.values():
            soak.finish()
    for soak in soaks.values():
        soak.save()


def _tell(ctx: CheckContext, blocks: list[Block], block: Block) -> None:
    """The soak's load time left as `block` starts: its own and every later block's (server
    starts and the grace after each block come on top)."""
    later = blocks[blocks.index(block) :]
    ctx.advance(Progress(block.role, left_s=sum(b.end_s - b.start_s for b in later)))
