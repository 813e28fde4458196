//! TLS on every control path of a real mesh (docs/security.md#tls-on-the-control-paths): the
//! admin API and the console over https with a test CA, client certificates instead of tokens,
//! the config fetched over https with a CA or a pinned key, and a follower refusing a primary
//! whose certificate does not verify; tokens and certificates re-read on SIGHUP.
//!
//! A harness of named trials over one shared mesh (`test_support::trials`); each trial writes
//! resources of its own names, so they run in any order.

mod tls {
    pub mod admin;
    pub mod follow;
    pub mod world;
}

use test_support::{trials, Threads};
use tls::*;

fn main() {
    let all = trials![world::MESH =>
        admin::curl_reads_the_api_over_https_with_the_ca_and_a_client_certificate,
        admin::a_client_without_a_certificate_is_refused_in_the_handshake,
        admin::no_plain_http_is_answered_on_a_tls_listener,
        admin::the_console_is_served_over_https,
        admin::the_cli_writes_and_reads_over_https_with_a_client_certificate,
        admin::the_cli_refuses_an_api_whose_certificate_does_not_verify,
        admin::a_token_file_rewritten_is_in_force_after_sighup,
        admin::a_renewed_certificate_is_served_after_sighup,
        follow::a_follower_fetches_over_https_with_the_ca_and_a_client_certificate,
        follow::a_follower_pinning_the_primarys_key_fetches_without_a_ca,
        follow::a_follower_refuses_a_primary_whose_certificate_does_not_verify,
    ];
    test_support::trials::run(all, Threads::One);
}
