//! The config in etcd (`--config-store etcd://...`): any aggregator connected to the store
//! takes the API's writes, each an etcd transaction conditioned on the revision it was based
//! on, so of two writes based on one generation exactly one lands (the other is a 409), and a
//! write acknowledged by etcd is never lost with an aggregator. The generation is the
//! document key's etcd revision, which only grows. Every connected aggregator watches the key
//! and reloads; after a compaction or a broken watch it reads the whole document again (as
//! APISIX's `config_etcd.lua` and Traefik's kv provider do). With the store unreachable, nodes
//! serve what they have (the document is kept on disk, as a follower's) and writes answer 503
//! with `Retry-After`. Probers and store-less aggregators follow the connected aggregators
//! through gossip, as they follow a primary.
//!
//! - [`settings`]: the store's address and credentials.
//! - [`client`]: etcd's JSON gateway: get, conditional put, watch.
//! - [`sync`]: the task that keeps a node's document in step with the store, and the writes.

pub mod client;
pub mod settings;
pub mod sync;

pub use client::{EtcdClient, EtcdError, Put};
pub use settings::{StoreSettings, StoreUrl, DEFAULT_REQUEST_TIMEOUT};
pub use sync::StoreLink;
