//! The console (docs/operations.md#the-console) in a real browser: headless Chromium driven
//! through ChromeDriver (WebDriver, with `fantoccini`) against a real aggregator and three
//! probers. The page loads without console errors, the grid shows every endpoint and region,
//! an origin that stops turns unhealthy on the page within the live bound with its votes, a
//! drain through the page lands with the admin token and is refused with the read token, the
//! explain view says what `GET /explain` says, a pool named as markup is text, and every answer
//! carries the console's security headers.
//!
//! Chromium and ChromeDriver are Debian's (`chromium`, `chromium-driver`), installed by
//! `scripts/test.sh`.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use test_support::config::{Config, Lb, Monitor, Pool};
use test_support::*;

/// The pool whose name is markup: the page must show it as text.
const MARKUP: &str = "<img src=x onerror=document.title='owned'>";

struct World {
    runtime: tokio::runtime::Runtime,
    browser: Client,
    driver: Child,
    dir: tempfile::TempDir,
    admin: SocketAddr,
    origins: Vec<Origin>,
    _mesh: Procs,
}

impl Drop for World {
    fn drop(&mut self) {
        let browser = self.browser.clone();
        let _ = self.runtime.block_on(browser.close());
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// The admin token: `admin_token_args` gives it to the aggregator, `get` sends it.
const WRITE_TOKEN: &str = "secret-token";
const READ_TOKEN: &str = "read-only-token";

fn start_world() -> World {
    let (dir, key) = scratch_dir_with_key("console");
    let origins: Vec<Origin> = (2..=4)
        .map(|i| origin_on(&format!("127.0.0.{i}")))
        .collect();
    let mut web = Pool::new("web").monitor("http").regions(&["WEU"]);
    for (i, o) in origins.iter().enumerate() {
        web = web.origin(
            &format!("web-{i}"),
            (format!("127.0.0.{}", i + 2).as_str(), o.port),
        );
    }
    let config = dir.path().join("meshlb.toml");
    Config::new()
        .monitor(
            Monitor::http("http")
                .interval(1)
                .timeout(1)
                .retries(0)
                .consecutive(1, 1),
        )
        .pool(web)
        .pool(
            Pool::new(MARKUP)
                .monitor("http")
                .regions(&["WEU"])
                .origin("odd", ("127.0.0.2", origins[0].port)),
        )
        .load_balancer(Lb::new("www.example.test").pools(&["web"]))
        .write(&config);
    let read = dir.path().join("read-token");
    std::fs::write(&read, READ_TOKEN).expect("read token");
    let admin = free_tcp();
    let mut extra = admin_token_args(dir.path());
    extra.extend(["--admin-read-token-file".into(), read.display().to_string()]);
    let mesh = start_mesh(&config, &key, admin, &extra);
    let driver_port = free_tcp().port();
    let driver = Command::new("chromedriver")
        .arg(format!("--port={driver_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver (Debian's chromium-driver; scripts/test.sh installs it)");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let browser = runtime.block_on(connect(driver_port, dir.path()));
    wait_for("every endpoint healthy", Duration::from_secs(30), || {
        get(admin, "/status").is_some_and(|s| {
            s["pools"]
                .as_array()
                .is_some_and(|p| p.iter().all(|p| p["state"] == "healthy"))
        })
    });
    World {
        runtime,
        browser,
        driver,
        dir,
        admin,
        origins,
        _mesh: mesh,
    }
}

/// A WebDriver session of headless Chromium, with the flags this machine's closed network
/// needs (no background networking), logging the browser's console.
async fn connect(port: u16, dir: &std::path::Path) -> Client {
    let profile = dir.join("chromium-profile");
    let caps = json!({
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--no-first-run", "--window-size=1280,900",
                format!("--user-data-dir={}", profile.display()),
            ],
        },
        "goog:loggingPrefs": { "browser": "ALL" },
    });
    let caps = match caps {
        Value::Object(map) => map,
        _ => unreachable!("an object"),
    };
    wait_for("chromedriver to listen", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .unwrap_or_else(|e| panic!("no WebDriver session from chromedriver: {e}"))
}

/// The raw head of `GET path` (no token).
fn head_of(admin: SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(admin).expect("admin");
    write!(s, "GET {path} HTTP/1.0\r\n\r\n").expect("write");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    raw.split_once("\r\n\r\n")
        .map(|(h, _)| h.to_ascii_lowercase())
        .unwrap_or_default()
}

impl World {
    fn run<T>(&self, f: impl std::future::Future<Output = T>) -> T {
        self.runtime.block_on(f)
    }

    /// Opens the console's `fragment` (`#/grid`) with `token` in the tab's sessionStorage.
    fn open(&self, fragment: &str, token: Option<&str>) {
        let base = format!("http://{}/ui/", self.admin);
        self.run(async {
            self.browser.goto(&base).await.expect("the console");
            let script = match token {
                Some(_) => "sessionStorage.setItem('meshlb.admin-token', arguments[0]);",
                None => "sessionStorage.removeItem('meshlb.admin-token');",
            };
            self.browser
                .execute(script, vec![json!(token.unwrap_or(""))])
                .await
                .expect("the token set");
            // What the page logged before it had its token is not this view's.
            let _ = self.browser.issue_cmd(BrowserLog).await;
            self.browser
                .goto(&format!("{base}{fragment}"))
                .await
                .expect("the view");
            self.browser.refresh().await.expect("reloaded");
        });
    }

    /// The text of the page's main view.
    fn view_text(&self) -> String {
        self.run(async {
            match self.browser.find(Locator::Id("view")).await {
                Ok(e) => e.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            }
        })
    }

    /// Waits (20 s at most) for the view to hold `needle`.
    fn wait_text(&self, needle: &str) {
        wait_for(
            &format!("the page to show {needle:?}"),
            Duration::from_secs(20),
            || self.view_text().contains(needle),
        );
    }

    /// Runs `script` in the page: its value.
    fn eval(&self, script: &str) -> Value {
        self.run(self.browser.execute(script, vec![]))
            .expect("the script ran")
    }

    /// The browser console's messages at level SEVERE since the last call (ChromeDriver's
    /// log command: WebDriver itself has none).
    fn console_errors(&self) -> Vec<String> {
        let logs = self
            .run(self.browser.issue_cmd(BrowserLog))
            .expect("the browser's log");
        logs.as_array()
            .into_iter()
            .flatten()
            .filter(|l| l["level"] == "SEVERE")
            .map(|l| l["message"].to_string())
            .collect()
    }
}

/// ChromeDriver's `POST /session/{id}/se/log` of the browser's console.
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

static WORLD: Shared<World> = Shared::new(start_world);

fn the_page_loads_with_no_console_errors(w: &mut World) {
    w.open("#/", Some(WRITE_TOKEN));
    w.wait_text("Load balancers");
    w.wait_text("www.example.test");
    assert_eq!(w.console_errors(), Vec::<String>::new());
}

fn the_grid_shows_every_endpoint_and_every_region(w: &mut World) {
    w.open("#/grid", Some(WRITE_TOKEN));
    w.wait_text("4 endpoints");
    let text = w.view_text();
    for region in [
        "WNAM", "ENAM", "WEU", "EEU", "NSAM", "SSAM", "OC", "ME", "NAF", "SAF", "SAS", "SEAS",
        "NEAS",
    ] {
        assert!(text.contains(region), "{region}: {text}");
    }
    for endpoint in ["web-0", "web-1", "web-2", "odd"] {
        assert!(text.contains(endpoint), "{endpoint}: {text}");
    }
}

fn a_stopped_origin_turns_unhealthy_on_the_page_within_the_live_bound(w: &mut World) {
    w.open("#/pool/web", Some(WRITE_TOKEN));
    w.wait_text("web-1");
    let stopped = Stopped::new([&w.origins[1]]);
    let down = |s: &Value| s["pools"][0]["endpoints"][1]["verdict"] == "unhealthy";
    wait_for(
        "the aggregator to find web-1 unhealthy",
        Duration::from_secs(20),
        || get(w.admin, "/status").is_some_and(|s| down(&s)),
    );
    let since = Instant::now();
    wait_for(
        "the page to show web-1 unhealthy",
        Duration::from_secs(10),
        || {
            w.eval("return [...document.querySelectorAll('#view tbody tr')].find(r => r.textContent.includes('web-1'))?.textContent ?? ''")
            .as_str()
            .is_some_and(|row| row.contains("unhealthy"))
        },
    );
    let took = since.elapsed();
    println!("web-1 unhealthy on the page {took:?} after the aggregator");
    assert!(
        took < Duration::from_secs(4),
        "the live bound (2 s), with a margin: {took:?}"
    );
    // The votes behind it: the grid's WEU cell opens each datacenter's vote and reason.
    w.open("#/grid?pool=web", Some(WRITE_TOKEN));
    w.wait_text("web-1");
    let opened = w.eval(
        "const b = document.querySelector('button[aria-label^=\"web-1 in WEU\"]');
         if (b) { b.click(); return true; } return false;",
    );
    assert_eq!(opened, json!(true));
    wait_for("the datacenters' votes", Duration::from_secs(10), || {
        w.eval("return document.querySelector('.detail')?.textContent ?? ''")
            .as_str()
            .is_some_and(|t| t.contains("3 unhealthy") && t.contains("refused"))
    });
    drop(stopped);
}

fn the_pool_page_charts_each_regions_rtt_over_the_last_hour(w: &mut World) {
    w.open("#/pool/web", Some(WRITE_TOKEN));
    w.wait_text("EWMA RTT over the last hour");
    wait_for("the WEU line", Duration::from_secs(10), || {
        w.eval("return document.querySelectorAll('svg.chart polyline.r-WEU').length") == json!(1)
    });
}

fn accept_the_confirmation(w: &World) {
    wait_for("the confirmation", Duration::from_secs(5), || {
        w.run(w.browser.get_alert_text()).is_ok()
    });
    w.run(w.browser.accept_alert()).expect("accepted");
}

fn click_the_button(w: &World, row: &str, label: &str) {
    let script = format!(
        "const row = [...document.querySelectorAll('#view tbody tr')].find(r => r.textContent.includes({row:?}));
         const b = row && [...row.querySelectorAll('button')].find(b => b.textContent === {label:?});
         if (b) {{ setTimeout(() => b.click(), 0); return true; }} return false;"
    );
    assert_eq!(w.eval(&script), json!(true), "no {label} button on {row}");
}

fn drained(w: &World, endpoint: &str) -> bool {
    get(w.admin, "/drain").is_some_and(|d| {
        d.as_array()
            .is_some_and(|d| d.iter().any(|x| x["endpoint"] == endpoint))
    })
}

fn a_drain_through_the_page_lands_with_the_admin_token(w: &mut World) {
    w.open("#/pool/web", Some(WRITE_TOKEN));
    w.wait_text("web-2");
    click_the_button(w, "web-2", "Drain");
    accept_the_confirmation(w);
    wait_for("web-2 drained", Duration::from_secs(10), || {
        drained(w, "web-2")
    });
    wait_for("the drain in GET /status", Duration::from_secs(10), || {
        get(w.admin, "/status")
            .is_some_and(|s| s["pools"][0]["endpoints"][2]["drained_since"].is_u64())
    });
    // Undrained again for the other trials.
    w.wait_text("Undrain");
    click_the_button(w, "web-2", "Undrain");
    accept_the_confirmation(w);
    wait_for("web-2 undrained", Duration::from_secs(10), || {
        !drained(w, "web-2")
    });
}

fn a_drain_through_the_page_is_refused_with_the_read_token(w: &mut World) {
    w.open("#/pool/web", Some(READ_TOKEN));
    w.wait_text("web-0");
    click_the_button(w, "web-0", "Drain");
    accept_the_confirmation(w);
    wait_for("the refusal shown", Duration::from_secs(10), || {
        w.eval("return document.getElementById('notice').textContent")
            .as_str()
            .is_some_and(|t| t.contains("refused (401)") || t.contains("refused (403)"))
    });
    assert!(!drained(w, "web-0"));
}

fn disabling_an_endpoint_off_the_config_primary_is_refused_with_the_apis_message(w: &mut World) {
    w.open("#/pool/web", Some(WRITE_TOKEN));
    w.wait_text("web-0");
    click_the_button(w, "web-0", "Disable");
    accept_the_confirmation(w);
    wait_for("the API's refusal shown", Duration::from_secs(10), || {
        w.eval("return document.getElementById('notice').textContent")
            .as_str()
            .is_some_and(|t| t.contains("refused (503)") && t.contains("not the config primary"))
    });
}

fn the_overview_fits_a_phone_screen(w: &mut World) {
    w.run(w.browser.set_window_size(390, 844)).expect("resized");
    w.open("#/", Some(WRITE_TOKEN));
    w.wait_text("Load balancers");
    let overflow = w.eval("return document.documentElement.scrollWidth - window.innerWidth");
    w.run(w.browser.set_window_size(1280, 900))
        .expect("resized back");
    assert!(
        overflow.as_i64().is_some_and(|o| o <= 0),
        "wider than the screen by {overflow}"
    );
}

fn the_explain_view_says_what_get_explain_says(w: &mut World) {
    w.open(
        "#/explain?lb=www.example.test&client=192.0.2.1&mode=dns",
        Some(WRITE_TOKEN),
    );
    w.wait_text("Decision");
    let api = get(
        w.admin,
        "/explain?lb=www.example.test&client=192.0.2.1&mode=dns",
    )
    .expect("explain");
    let outcome =
        w.eval("return document.getElementById('outcome').querySelector('strong').textContent");
    assert_eq!(outcome, api["outcome"]);
    let steps =
        w.eval("return [...document.querySelectorAll('#steps li')].map(l => l.textContent)");
    assert_eq!(steps, api["steps"]);
}

fn a_pool_named_as_markup_is_shown_as_text(w: &mut World) {
    w.open("#/", Some(WRITE_TOKEN));
    w.wait_text(MARKUP);
    assert_eq!(
        w.eval("return document.querySelectorAll('#view img').length"),
        json!(0)
    );
    assert_ne!(w.eval("return document.title"), json!("owned"));
}

fn every_answer_carries_the_consoles_security_headers(w: &mut World) {
    let page = head_of(w.admin, "/ui/");
    assert!(
        page.contains("content-security-policy: default-src 'none'; script-src 'self'"),
        "{page}"
    );
    assert!(page.contains("x-frame-options: deny"), "{page}");
    assert!(page.contains("x-content-type-options: nosniff"), "{page}");
    let api = head_of(w.admin, "/status");
    assert!(api.contains("frame-ancestors 'none'"), "{api}");
    let _ = &w.dir;
}

fn main() {
    let all = trials![WORLD =>
        the_page_loads_with_no_console_errors,
        the_grid_shows_every_endpoint_and_every_region,
        a_stopped_origin_turns_unhealthy_on_the_page_within_the_live_bound,
        the_pool_page_charts_each_regions_rtt_over_the_last_hour,
        a_drain_through_the_page_lands_with_the_admin_token,
        a_drain_through_the_page_is_refused_with_the_read_token,
        disabling_an_endpoint_off_the_config_primary_is_refused_with_the_apis_message,
        the_overview_fits_a_phone_screen,
        the_explain_view_says_what_get_explain_says,
        a_pool_named_as_markup_is_shown_as_text,
        every_answer_carries_the_consoles_security_headers,
    ];
    trials::run(all, Threads::One);
}
