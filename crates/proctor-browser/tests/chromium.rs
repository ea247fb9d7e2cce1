//! The looks through a real headless Chromium (Debian's `chromium`, which CI installs).

use std::path::PathBuf;

use proctor_browser::{compare, find_browser, run_job, BrowserSource, Job, Look, Viewport};

fn browser() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    find_browser(&BrowserSource::SearchPath(
        std::env::split_paths(&path).collect(),
    ))
    .expect("these tests need a real browser: apt-get install chromium")
}

#[test]
fn a_page_is_seen_with_its_elements_text_visibility_and_screenshots() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("index.html");
    std::fs::write(
        &page,
        r#"<!doctype html><html><body style="margin:0">
<div id="status">Loading</div>
<ul><li class="item">one</li><li class="item" style="display:none">two</li><li class="item">three</li></ul>
<div id="box" style="width:40px;height:30px;background:rgb(200,0,0)"></div>
<script>window.addEventListener("load", () => { document.getElementById("status").textContent = "Ready"; });</script>
</body></html>"#,
    )
    .unwrap();
    let url = format!("file://{}", page.display());
    let look = |selector: Option<&str>, screenshot: bool| Look {
        url: url.clone(),
        selector: selector.map(str::to_string),
        screenshot,
    };
    let job = Job {
        browser: browser(),
        viewport: Viewport {
            width: 320,
            height: 200,
        },
        timeout_ms: 30_000,
        looks: vec![
            look(Some("#status"), false),
            look(Some("li.item"), false),
            look(Some("#box"), true),
            look(None, true),
            Look {
                url: format!("file://{}/missing.html", dir.path().display()),
                selector: Some("p".into()),
                screenshot: false,
            },
        ],
    };
    let r = run_job(&job);
    assert_eq!(r.seen.len(), 5);
    for s in &r.seen {
        assert_eq!(s.error, None, "{s:?}");
    }
    // What the load handler wrote is what is seen.
    assert_eq!(r.seen[0].count, Some(1));
    assert_eq!(r.seen[0].elements[0].text, "Ready");
    assert!(r.seen[0].elements[0].visible);
    // Each element with its visibility.
    let items: Vec<(&str, bool)> = r.seen[1]
        .elements
        .iter()
        .map(|e| (e.text.as_str(), e.visible))
        .collect();
    assert_eq!(r.seen[1].count, Some(3));
    assert_eq!(items, [("one", true), ("two", false), ("three", true)]);
    // The element's screenshot is its box, all red.
    let shot = r.seen[2].screenshot.as_ref().unwrap();
    let img = image::load_from_memory(shot).unwrap().to_rgba8();
    assert_eq!(img.dimensions(), (40, 30));
    assert!(img.pixels().all(|p| p.0 == [200, 0, 0, 255]), "not all red");
    // The window's screenshot is the viewport; it differs from the element's everywhere.
    let window = r.seen[3].screenshot.as_ref().unwrap();
    let d = compare(window, shot).unwrap();
    assert_eq!(d.size, (320, 200));
    assert_eq!(d.share, 1.0);
    assert_eq!(compare(window, window).unwrap().differing, 0);
    // A page that is not there did not load; the browser itself was fine.
    let missing = &r.seen[4];
    assert!(
        missing
            .load_error
            .as_deref()
            .unwrap()
            .contains("ERR_FILE_NOT_FOUND"),
        "{missing:?}"
    );
}
