"""A seeded, deterministic whole-cluster simulation of replication (docs/architecture.md).

Real `broker.core.partition.Partition`s over real `broker.log.log.Log`s (in a temporary directory),
the real replication rules (`broker.core.replication`) and the real controller core
(`controller.state.handle`), wired together by small synchronous re-implementations of the
async shells (fetcher, fetch/produce handlers, ISR manager, controller channel) and driven by
one seeded `random.Random` and a simulated clock: no threads, no trio, no wall time.

Modules:
- `config`: the knobs (intervals, delays, fault rates) of one simulated run.
- `scheduler`: the clock and its event queue; one event is one step.
- `network`: messages between brokers with delay, drop and partitions; request/response.
- `zk`: a simulated ZooKeeper: versioned znodes (CAS), sessions, ephemeral nodes.
- `disk`: the Log with an in-memory index of its batches, and the crash that loses
  unflushed data.
- `broker`: one broker: LeaderAndIsr, Fetch, Produce, OffsetForLeaderEpoch, StopReplica,
  UpdateMetadata and the ISR manager; `fetcher`: its replica fetchers (the follower side).
- `controller_shell`: the controller around `controller.state.handle`, and its channel.
- `producer`: an acks=all producer of unique values.
- `nemesis`: crashes, restarts, network partitions, ZooKeeper session expiry.
- `invariants`: what must hold after every step, and at the end.
- `cluster`: wires it all and runs a seed; `replay` runs one seed verbosely:
  `python -m tests.simulation.replay --seed N [--steps S]`.
- `test_simulation`: hundreds of seeds; `test_scenarios`: the KIP-101 stories and
  the bugs the simulation found, scripted.
"""
