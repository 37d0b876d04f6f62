//! The workspace's shape, checked on every run (`.ci/test` runs this first):
//!
//! - no module circle in the proxy or the runtime (the crate root included: it only declares
//!   and re-exports);
//! - no circle between the rooms of either (its top-level modules, a folder or a top-level file
//!   each; the crate root and test modules aside): each room can be read and changed above the
//!   ones it uses, and a failure names the imports that close the circle;
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

/// The rooms of `name` (its top-level modules) form layers: no circle between them, so each
/// can be read and changed above the ones it uses. A failure names the imports in the circle.
fn rooms_form_layers(name: &str) {
    let graph = graph_of(name);
    let circles = graph.rooms().circles();
    let imports: Vec<_> = circles
        .iter()
        .flat_map(|rooms| graph.imports_between(rooms))
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
    rooms_form_layers("proxy");
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
fn the_runtimes_rooms_form_layers() {
    rooms_form_layers("runtime");
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
    let writes = ["task_store()", "open_turn", "TaskTurn", "task_store::turn"];
    let found = graph.mentions("faces", &writes);
    assert!(
        found.is_empty(),
        "a face reaches the task store's writes: {found:#?}"
    );
    let reads = graph.mentions("turns", &["open_turn"]);
    assert!(
        !reads.is_empty(),
        "the check looks where the writes are (the turn service opens turns): {reads:#?}"
    );
}
