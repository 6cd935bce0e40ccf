//! End-to-end scenarios of the behaviour docs/HTTP.md and docs/CONFIG.md describe, run against
//! a real frontend binary on loopback.
//!
//! The scenarios are plain functions taking the path of the binary under test, so every
//! frontend runs the same suite: its `tests/e2e.rs` is one line,
//! `weir_e2e::suite!(env!("CARGO_BIN_EXE_weir-gateway"));`, which expands to one `#[test]` per
//! scenario. A binary must accept `--config F --listen ADDR --admin ADDR --workers N`, answer
//! `/healthz` on the admin address, and drain on SIGINT.
//!
//! Scenarios that need Redis start their own `redis-server` on a free loopback port and skip
//! (with a message) when it is not installed, unless `WEIR_REQUIRE_REDIS=1` ([`redis`]).
//!
//! Everything is bounded: every socket has a timeout, every child process is killed when its
//! [`Gateway`] is dropped, and upstreams are threads of the test process on 127.0.0.1.

pub mod certs;
pub mod client;
pub mod cluster;
pub mod harness;
pub mod redis;
pub mod scenarios;
pub mod scenarios_cluster;
pub mod scenarios_headers;
pub mod scenarios_outlier;
pub mod scenarios_proxies;
pub mod scenarios_quota;
pub mod scenarios_secrets;
pub mod scenarios_sim;
pub mod upstreams;

pub use client::{Client, Resp};
pub use harness::Gateway;

/// Expands to one `#[test]` per scenario in [`scenarios`], each run against `$bin`.
#[macro_export]
macro_rules! suite {
    ($bin:expr) => {
        $crate::suite!(@each $bin;
            no_route_is_404,
            rate_limit_429_with_headers,
            flaky_retried_with_idempotency_key,
            post_without_key_not_retried,
            slow_upstream_504_within_total_budget,
            garbage_is_400_and_close,
            content_length_with_transfer_encoding_never_forwarded,
            obs_fold_is_400,
            huge_headers_431_and_long_uri_414,
            other_http_version_505,
            slow_client_head_408,
            keep_alive_reuses_client_and_upstream_connections,
            request_id_propagated_and_hop_by_hop_removed,
            chunked_upload_streamed_beyond_replay_limit,
            chunked_download_streamed,
            head_request_has_no_body,
            upstream_body_truncated_cuts_client,
            invalid_upstream_response_502,
            admin_metrics_healthz_config,
            admin_reload_bad_then_good,
            breaker_opens_then_fallback,
            breaker_three_phases_recover_through_half_open,
            slow_streaming_body_not_cut_by_deadlines,
            body_pause_beyond_per_try_streams_until_idle_timeout,
            sigint_drains_in_flight_and_exits_0,
            two_instances_local_limits_multiply,
            global_limit_shared_and_store_failure_explicit,
            global_lease_over_admission_bounded_under_load,
            leaky_bucket_shapes_a_burst,
            concurrency_queue_full_timeout_and_proceed,
            shadow_mode_counts_but_never_rejects,
            empty_key_403_and_key_too_long_400,
            access_log_fields_and_redaction,
            reload_keeps_limiter_state,
            sighup_reload_under_load_keeps_limiter_state,
            every_response_has_request_id_and_instance,
            metrics_families_from_start_up_with_route_labels,
            slowloris_trickle_gets_408,
            missing_host_accepted_duplicate_host_400,
            bad_chunk_after_forwarding_counted_once,
            auth_limits_by_verified_consumer_and_failures_consume_nothing,
            admin_token_required_read_only_and_sighup_reload,
            non_loopback_admin_without_token_refused,
            cluster_limits_exact_across_two_instances_on_every_master,
            cluster_master_killed_only_its_slots_fail_then_recover,
            fail_open_expires_with_bypass_episode,
            rollback_restores_a_revision_and_keeps_state,
            simulate_agrees_with_the_gateway_on_admissions,
            evidence_and_ratelimit_headers_switch_independently,
            outlier_failing_endpoint_ejected_and_back_after_base,
            outlier_two_of_three_failing_at_half_ejects_one,
            outlier_dead_port_ejected_on_connect_failures,
            outlier_panic_sends_traffic_to_all,
            quota_exhausted_duplicates_free_adjust_raises,
            quota_later_gate_rejection_free_retries_once_reload_keeps,
            quota_survives_kill_9_under_load,
            quota_global_exact_across_instances_bypass_written_back_once,
            secrets_never_reach_output,
            access_log_reopened_on_sigusr1_and_reload,
            client_address_behind_trusted_proxies,
        );
    };
    (@each $bin:expr; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::scenarios::$name(::std::path::Path::new($bin));
            }
        )*
    };
}
