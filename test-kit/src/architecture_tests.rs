//! The module graph's reading, circles, groups and face checks on small made-up crates.

use super::*;

fn graph(files: &[(&str, &str)]) -> ModuleGraph {
    ModuleGraph::from_sources(files.iter().map(|(file, text)| {
        let file = PathBuf::from(file);
        let module = module_path(Path::new(""), &file).expect("not main.rs");
        (module, file, (*text).to_owned())
    }))
}

fn m(path: &str) -> ModulePath {
    path.split("::")
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_file_is_the_module_its_path_names() {
    let src = Path::new("src");
    assert_eq!(module_path(src, Path::new("src/lib.rs")), Some(vec![]));
    assert_eq!(module_path(src, Path::new("src/main.rs")), None);
    assert_eq!(module_path(src, Path::new("src/a/mod.rs")), Some(m("a")));
    assert_eq!(module_path(src, Path::new("src/a/b.rs")), Some(m("a::b")));
}

#[test]
fn use_trees_are_expanded_and_resolved_to_the_module_that_holds_the_item() {
    let g = graph(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a/mod.rs", "pub mod x;\npub mod y;\n"),
        ("a/x.rs", ""),
        ("a/y.rs", ""),
        (
            "b.rs",
            "use crate::a::{x::Thing, y::{self, Other}};\nfn f() { super::a::x::call(); }\n",
        ),
    ]);
    let named = g.named_by(&m("b")).expect("b is a module");
    assert_eq!(named, &BTreeSet::from([m("a::x"), m("a::y")]));
}

#[test]
fn a_path_in_a_serde_attribute_names_a_module_and_one_in_a_message_does_not() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "#[serde(serialize_with = \"crate::b::as_text\")]\nstruct S;\n",
        ),
        ("b.rs", "const M: &str = \"see crate::a::run\";\n"),
    ]);
    assert_eq!(g.named_by(&m("a")), Some(&BTreeSet::from([m("b")])));
    assert_eq!(g.named_by(&m("b")), Some(&BTreeSet::new()));
}

#[test]
fn three_modules_that_name_each_other_in_turn_are_a_circle() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::B;\n"),
        ("b.rs", "use crate::c::C;\n"),
        ("c.rs", "use crate::a::A;\n"),
        ("d.rs", "use crate::a::A;\n"),
    ]);
    assert_eq!(g.circles(), vec![vec!["a", "b", "c"]]);
}

#[test]
fn a_parent_naming_its_children_is_structure_but_siblings_meeting_through_it_are_a_circle() {
    let structure = graph(&[
        (
            "lib.rs",
            "mod a;\npub use crate::a::run;\npub struct Shared;\n",
        ),
        ("a.rs", "use crate::Shared;\n"),
    ]);
    assert!(structure.circles().is_empty());
    let circle = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "use super::a::A;\npub struct B;\n"),
    ]);
    assert_eq!(circle.circles(), vec![vec!["a", "b"]]);
}

#[test]
fn comments_strings_and_a_trailing_test_module_name_nothing() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "// see crate::b::B\nconst URL: &str = \"http://crate::b\";\n#[cfg(test)]\nmod tests {\n    use crate::b::B;\n}\n",
        ),
        ("b.rs", "use crate::a::A;\n"),
    ]);
    assert_eq!(g.named_by(&m("a")), Some(&BTreeSet::new()));
    assert!(g.circles().is_empty());
}

#[test]
fn a_face_naming_another_face_is_found_and_one_naming_a_service_is_not() {
    let g = graph(&[
        ("lib.rs", "pub mod faces;\npub mod turns;\n"),
        ("faces/mod.rs", "pub mod contract;\npub mod mcp;\n"),
        ("faces/a2a/mod.rs", "use crate::turns::TurnService;\n"),
        ("faces/mcp/mod.rs", "pub mod send;\n"),
        (
            "faces/mcp/send.rs",
            "use crate::faces::a2a::error::Problem;\n",
        ),
        ("turns.rs", ""),
    ]);
    let found = g.face_imports("faces");
    assert_eq!(
        found,
        vec![FaceImport {
            from: "faces::mcp::send".to_owned(),
            to: "faces::a2a".to_owned(),
            file: PathBuf::from("faces/mcp/send.rs"),
        }]
    );
}

#[test]
fn rooms_in_a_circle_are_found_though_no_two_modules_are_and_their_imports_named() {
    let g = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a/mod.rs", "mod x;\nmod y;\n"),
        ("a/x.rs", "use crate::b::B;\n"),
        ("a/y.rs", "pub struct Y;\n"),
        ("b.rs", "use crate::a::y::Y;\npub struct B;\n"),
        ("b_tests.rs", "use crate::a::x;\n"),
    ]);
    assert!(g.circles().is_empty(), "no module circle");
    assert_eq!(
        g.rooms().circles(),
        vec![vec!["a".to_owned(), "b".to_owned()]]
    );
    let imports: Vec<(String, String)> = g
        .imports_between(&["a".to_owned(), "b".to_owned()], 1)
        .into_iter()
        .map(|i| (i.from, i.to))
        .collect();
    assert_eq!(
        imports,
        [("a::x".into(), "b".into()), ("b".into(), "a::y".into())]
    );
}

#[test]
fn rooms_in_areas_are_two_levels_down_without_the_areas_own_file() {
    let g = graph(&[
        ("lib.rs", "mod a;\n"),
        ("a/mod.rs", "mod x;\nmod y;\npub use crate::a::x::X;\n"),
        ("a/x/mod.rs", "mod deep;\npub struct X;\n"),
        ("a/x/deep.rs", "use crate::a::y::Y;\n"),
        ("a/y.rs", "use crate::a::x::X;\npub struct Y;\n"),
    ]);
    let rooms = g.rooms_in_areas();
    let mut nodes: Vec<String> = rooms.modules().map(|m| display(m)).collect();
    nodes.sort();
    assert_eq!(nodes, ["a::x", "a::y"]);
    assert_eq!(
        rooms.circles(),
        vec![vec!["a::x".to_owned(), "a::y".to_owned()]]
    );
    let imports: Vec<(String, String)> = g
        .imports_between(&["a::x".to_owned(), "a::y".to_owned()], 2)
        .into_iter()
        .map(|i| (i.from, i.to))
        .collect();
    assert_eq!(
        imports,
        [
            ("a::x::deep".into(), "a::y".into()),
            ("a::y".into(), "a::x".into())
        ]
    );
}
