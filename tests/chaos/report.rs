//! The chaos report: `target/chaos/report.json` and a Markdown table, `report.md`.

use std::time::Duration;

use serde_json::json;

pub struct Outcome {
    pub scenario: String,
    pub expected: String,
    pub observed: String,
    pub passed: bool,
    pub detection: Option<Duration>,
    pub false_changes: usize,
    pub failed_requests: usize,
}

impl Outcome {
    pub fn new(
        scenario: impl Into<String>,
        expected: impl Into<String>,
        observed: impl Into<String>,
        passed: bool,
    ) -> Outcome {
        Outcome {
            scenario: scenario.into(),
            expected: expected.into(),
            observed: observed.into(),
            passed,
            detection: None,
            false_changes: 0,
            failed_requests: 0,
        }
    }

    pub fn detection(mut self, d: Duration) -> Outcome {
        self.detection = Some(d);
        self
    }

    pub fn false_changes(mut self, n: usize) -> Outcome {
        self.false_changes = n;
        self
    }

    pub fn failed_requests(mut self, n: usize) -> Outcome {
        self.failed_requests = n;
        self
    }
}

/// Writes both files under `target/chaos/`.
pub fn write(outcomes: &[Outcome]) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("../chaos");
    std::fs::create_dir_all(&dir).expect("target/chaos");
    let rows: Vec<serde_json::Value> = outcomes
        .iter()
        .map(|o| {
            json!({
                "scenario": o.scenario,
                "expected": o.expected,
                "observed": o.observed,
                "passed": o.passed,
                "detection_ms": o.detection.map(|d| d.as_millis() as u64),
                "false_changes": o.false_changes,
                "failed_requests": o.failed_requests,
            })
        })
        .collect();
    std::fs::write(
        dir.join("report.json"),
        serde_json::to_string_pretty(&json!({ "scenarios": rows })).unwrap_or_default(),
    )
    .expect("report.json");
    let mut md = String::from(
        "| scenario | expected | observed | time | false changes | failed requests | result |\n| --- | --- | --- | ---: | ---: | ---: | --- |\n",
    );
    for o in outcomes {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            o.scenario,
            o.expected,
            o.observed,
            o.detection
                .map_or("".to_string(), |d| format!("{:.2} s", d.as_secs_f64())),
            o.false_changes,
            o.failed_requests,
            if o.passed { "pass" } else { "FAIL" }
        ));
    }
    std::fs::write(dir.join("report.md"), &md).expect("report.md");
    println!("{md}");
}
