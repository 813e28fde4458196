//! `meshlb regions`.

use std::process::ExitCode;

use lb_core::RegionsTable;

pub fn run(regions: &RegionsTable) -> anyhow::Result<ExitCode> {
    for r in regions.regions() {
        let dcs: Vec<String> = r
            .datacenters
            .iter()
            .map(|d| format!("{} ({})", d.code, d.city))
            .collect();
        println!("{:<5} {:<26} {}", r.region.code(), r.name, dcs.join(", "));
    }
    println!("{} countries mapped", regions.country_count());
    Ok(ExitCode::SUCCESS)
}
