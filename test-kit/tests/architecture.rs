//! The workspace's shape, checked on every run (`.ci/test` runs this first):
//!
//! - no module circle in the proxy or the runtime (the crate root included: it only declares
//!   and re-exports);
//! - no circle between the rooms of the proxy (its top-level modules, a folder or a top-level
//!   file each; the crate root and test modules aside): each room can be read and changed above
//!   the ones it uses, and a failure names the imports that close the circle;
//! - the runtime in seven areas (its top-level folders), each importing only the areas its
//!   `//!` says it may (`May import: …`), which leaves no circle between areas; and no circle
//!   between the rooms inside the areas (`services::turns`, `stores::tasks`);
//! - no face of the runtime (`runtime/src/faces/<face>`) names another face: faces translate,
//!   the turn service decides;
//! - no face of the runtime writes a task: it never reaches the task store or its write
//!   handle, and reads tasks through the turn service.

use std::path::{Path, PathBuf};

use daedalus_test_kit::architecture::ModuleGraph;

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .join(name)
        .join("src")
}

fn graph_of(name: &str) -> ModuleGraph {
    let graph = ModuleGraph::read(&crate_src(name)).expect("the sources read");
    assert!(graph.modules().count() > 10, "{name}'s modules were found");
    graph
}

#[test]
fn the_proxy_has_no_module_circle() {
    let circles = graph_of("proxy").circles();
    assert!(
        circles.is_empty(),
        "module circles in the proxy: {circles:?}"
    );
}

#[test]
fn the_runtime_has_no_module_circle() {
    let circles = graph_of("runtime").circles();
    assert!(
        circles.is_empty(),
        "module circles in the runtime: {circles:?}"
    );
}

/// The groups of `name` `depth` segments deep (its rooms, or the runtime's areas at 1 and the
/// rooms inside them at 2) form layers: no circle between them, so each can be read and
/// changed above the ones it uses. A failure names the imports in the circle.
fn groups_form_layers(name: &str, depth: usize) {
    let graph = graph_of(name);
    let groups = if depth == 1 {
        graph.rooms()
    } else {
        graph.rooms_in_areas()
    };
    let circles = groups.circles();
    let imports: Vec<_> = circles
        .iter()
        .flat_map(|rooms| graph.imports_between(rooms, depth))
        .map(|i| format!("{} -> {} ({})", i.from, i.to, i.file.display()))
        .collect();
    assert!(
        circles.is_empty(),
        "circles between {name}'s rooms: {circles:?}\nthrough:\n{}",
        imports.join("\n")
    );
}

#[test]
fn the_proxys_rooms_form_layers() {
    groups_form_layers("proxy", 1);
}

/// `lifecycle` (start, serve, reload, drain) is the top room of `name`: it builds the others,
/// and none of them reaches back into it.
fn lifecycle_is_the_top_room(name: &str) {
    let rooms = graph_of(name).rooms();
    let lifecycle = vec!["lifecycle".to_owned()];
    assert!(
        rooms.modules().any(|room| *room == lifecycle),
        "{name} has a lifecycle room"
    );
    let importers: Vec<String> = rooms
        .modules()
        .filter(|room| {
            rooms
                .named_by(room)
                .is_some_and(|named| named.contains(&lifecycle))
        })
        .map(|room| room.join("::"))
        .collect();
    assert!(
        importers.is_empty(),
        "{name}'s rooms that import lifecycle: {importers:?}"
    );
}

#[test]
fn the_process_life_is_the_top_room_of_both_crates() {
    lifecycle_is_the_top_room("proxy");
    lifecycle_is_the_top_room("runtime");
}

#[test]
fn the_runtimes_areas_form_layers() {
    groups_form_layers("runtime", 1);
}

#[test]
fn the_rooms_inside_the_runtimes_areas_form_layers() {
    groups_form_layers("runtime", 2);
}

/// The areas an area's `//!` says it may import (`//! May import: `a`, `b`.`, or `nothing`).
fn declared_imports(area_file: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(area_file).expect("the area's file reads");
    let line = text
        .lines()
        .take_while(|line| line.starts_with("//!"))
        .find_map(|line| line.strip_prefix("//! May import:"))
        .unwrap_or_else(|| panic!("{} says what it may import", area_file.display()));
    line.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn each_area_of_the_runtime_imports_only_what_it_says() {
    let graph = graph_of("runtime");
    let areas = graph.rooms();
    let names: Vec<String> = areas.modules().map(|area| area.join("::")).collect();
    assert!(
        (6..=8).contains(&names.len()),
        "the runtime is a few areas, not {names:?}"
    );
    let mut outside = Vec::new();
    for area in areas.modules() {
        let dir = crate_src("runtime").join(&area[0]);
        assert!(
            dir.join("mod.rs").is_file(),
            "{} is an area: a folder with its mod.rs",
            area[0]
        );
        let allowed = declared_imports(&dir.join("mod.rs"));
        for to in areas.named_by(area).into_iter().flatten() {
            if !allowed.contains(&to[0]) {
                let through = graph.imports_between(&[area[0].clone(), to[0].clone()], 1);
                outside.push(format!(
                    "{} imports {} (it may import {allowed:?}): {:?}",
                    area[0],
                    to[0],
                    through
                        .iter()
                        .filter(|i| i.from.starts_with(&area[0]))
                        .map(|i| format!("{} -> {} ({})", i.from, i.to, i.file.display()))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(
        outside.is_empty(),
        "imports outside what an area says:\n{}",
        outside.join("\n")
    );
}

#[test]
fn no_face_of_the_runtime_imports_another_face() {
    let graph = graph_of("runtime");
    let faces: Vec<_> = graph
        .modules()
        .filter(|m| m.len() == 2 && m[0] == "faces")
        .collect();
    assert!(
        faces.len() >= 2,
        "the runtime's faces were found: {faces:?}"
    );
    let found = graph.face_imports("faces");
    assert!(found.is_empty(), "a face imports another: {found:#?}");
}

#[test]
fn no_face_of_the_runtime_writes_a_task() {
    let graph = graph_of("runtime");
    let writes = ["task_store()", "open_turn", "TaskTurn", "tasks::turn"];
    let found = graph.mentions("faces", &writes);
    assert!(
        found.is_empty(),
        "a face reaches the task store's writes: {found:#?}"
    );
    let reads = graph.mentions("services", &["open_turn"]);
    assert!(
        !reads.is_empty(),
        "the check looks where the writes are (the turn service opens turns): {reads:#?}"
    );
}
