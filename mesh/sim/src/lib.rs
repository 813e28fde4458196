//! A simulated WAN for meshlb's gossip mesh (docs/performance.md#the-mesh-at-fleet-size): real
//! mesh nodes — chitchat, the sealed transport with its fragmentation and reassembly — in one
//! process, their datagrams carried by a model of the internet instead of UDP sockets, on
//! tokio's paused clock so that a thousand nodes fit on two cores (each holds every member's
//! state: ~3.6 GB in all at 1,000) and measure the same whatever the CPU's speed. `bench/mesh_scale.sh` drives it.
//!
//! - [`regions`]: round-trip times between the 13 regions.
//! - [`net`]: the network: latency, jitter, loss per IP fragment and in bursts, partitions,
//!   fragment-filtering paths, inbox and egress limits.
//! - [`fleet`]: a fleet of nodes on it.
//! - [`measure`]: propagation, failure detection, false deaths, rolling restarts, costs.

pub mod fleet;
pub mod measure;
pub mod net;
pub mod regions;
