//! What meshlb's integration tests share (`tests/*.rs`, `tests/chaos/`): child processes that
//! die with the test, free loopback ports, HTTP origins that can be stopped, the admin API,
//! bounded waits, starters for small meshes (`meshes`), a real Unbound and dig, the harness of
//! named trials over shared worlds (`trials`, with the `trials!` macro), and builders that
//! render the configuration file (`config`). `use test_support::*;` brings every helper but the
//! builders, which are used as `test_support::config::{Config, Monitor, Pool, Lb, ...}`.
//!
//! `latency` (the emulated inter-region round-trip times) and `demo_origins` (origins that
//! answer with them) are `meshlb demo`'s too; the binary takes this crate without its default
//! `harness` feature, which holds everything else.

pub mod demo_origins;
pub mod latency;

#[cfg(feature = "harness")]
pub mod admin;
#[cfg(feature = "harness")]
pub mod config;
#[cfg(feature = "harness")]
pub mod dns;
#[cfg(feature = "harness")]
pub mod etcd;
#[cfg(feature = "harness")]
pub mod meshes;
#[cfg(feature = "harness")]
pub mod named;
#[cfg(feature = "harness")]
pub mod origins;
#[cfg(feature = "harness")]
pub mod pki;
#[cfg(feature = "harness")]
pub mod ports;
#[cfg(feature = "harness")]
pub mod processes;
#[cfg(feature = "harness")]
pub mod repo_files;
#[cfg(feature = "harness")]
pub mod scratch;
#[cfg(feature = "harness")]
pub mod trials;
#[cfg(feature = "harness")]
pub mod waits;

#[cfg(feature = "harness")]
pub use admin::{admin_token_args, get, live_generations, scrape};
#[cfg(feature = "harness")]
pub use dns::{dig_short, unbound};
#[cfg(feature = "harness")]
pub use meshes::{gossip_args, start_aggregator, start_mesh, start_mesh_seeded, start_mesh_split};
#[cfg(feature = "harness")]
pub use named::named_origin;
#[cfg(feature = "harness")]
pub use origins::{origin, origin_missing, origin_on, origin_saying, Origin, Stopped};
#[cfg(feature = "harness")]
pub use ports::{free_tcp, free_tcp_and_udp, free_tcp_and_udp_v6, free_udp};
#[cfg(feature = "harness")]
pub use processes::{heavy, meshlb_bin, spawn_logged, Procs};
#[cfg(feature = "harness")]
pub use scratch::scratch_dir_with_key;
#[cfg(feature = "harness")]
pub use trials::{Shared, Threads};
#[cfg(feature = "harness")]
pub use waits::{wait_for, wait_until};
