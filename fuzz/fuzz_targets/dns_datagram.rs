//! Feeds arbitrary datagrams to the DNS responder's entry point (parse, steer, encode), the
//! path every UDP packet from the network takes. Run: `cargo +nightly fuzz run dns_datagram`.
#![no_main]

use std::sync::{Arc, OnceLock};

use lb_core::affinity::AffinityKey;
use lb_core::config::Config;
use lb_dns::Responder;
use lb_edge::{Generation, PopInfo, Pops};
use lb_core::health::{HealthSnapshot, Verdict};
use lb_core::{Region, RegionsTable};
use libfuzzer_sys::fuzz_target;

const CONFIG: &str = r#"
[[pools]]
name = "eu"
origins = [{ name = "a", address = "192.0.2.1" }, { name = "b", address = "2001:db8::1", weight = 0.5 }]
[[pools]]
name = "us"
origins = [{ name = "c", address = "cdn.example.net" }]
[[zones]]
name = "example.test"
[geolocation]
networks = [{ cidr = "10.2.0.0/16", region = "ENAM" }]
[[load_balancers]]
name = "www.example.test"
default_pools = ["eu", "us"]
region_pools = { ENAM = ["us"] }
location_strategy = { prefer_ecs = "always" }
"#;

fn responder() -> &'static Responder {
    static R: OnceLock<Responder> = OnceLock::new();
    R.get_or_init(|| {
        let regions = RegionsTable::embedded().expect("regions");
        let config = Arc::new(Config::parse("fuzz.toml", CONFIG, &regions).expect("config"));
        let snapshot = HealthSnapshot::uniform(&config, Verdict::Healthy);
        let generation = Arc::new(Generation::new(1, config, snapshot).expect("generation"));
        let pop = PopInfo::new(&regions, Region::Weu, None);
        let pops = Arc::new(Pops::from_pointee(Vec::new()));
        Responder::new(generation, Arc::new(regions), AffinityKey::derive(b"fuzz"), pop, pops, 1)
            .expect("responder")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    let _ = responder().answer_datagram(data, "127.0.0.1:53000".parse().unwrap(), &mut out);
});
