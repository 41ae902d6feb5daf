//! A DOT graph read back, to check what `to_dot` writes.

use std::collections::HashMap;

/// A DOT graph read back: node attributes and edges with attributes.
#[derive(Debug, Default)]
pub(crate) struct Dot {
    pub(crate) nodes: HashMap<String, HashMap<String, String>>,
    pub(crate) edges: Vec<(String, String, HashMap<String, String>)>,
}

/// Reads `"id" [a=b, c="d"];` and `"a" -> "b" [..];` statements (what `to_dot` writes), with
/// DOT's string escapes.
pub(crate) fn parse_dot(s: &str) -> Dot {
    let body = s
        .trim()
        .strip_prefix("digraph deadlock {")
        .and_then(|b| b.strip_suffix('}'))
        .expect("a digraph");
    let mut toks = Vec::new();
    let mut it = body.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            c if c.is_whitespace() => {}
            '"' => {
                let mut t = String::new();
                while let Some(c) = it.next() {
                    match c {
                        '\\' => match it.next() {
                            Some('n') => t.push('\n'),
                            Some(x) => t.push(x),
                            None => panic!("dangling escape"),
                        },
                        '"' => break,
                        c => t.push(c),
                    }
                }
                toks.push(("str", t));
            }
            '[' | ']' | '=' | ',' | ';' => toks.push(("punct", c.to_string())),
            '-' => {
                assert_eq!(it.next(), Some('>'));
                toks.push(("arrow", "->".into()));
            }
            _ => {
                let mut t = c.to_string();
                while let Some(&c) = it.peek() {
                    if c.is_alphanumeric() || c == '_' || c == '.' || c == '#' {
                        t.push(c);
                        it.next();
                    } else {
                        break;
                    }
                }
                toks.push(("id", t));
            }
        }
    }
    let mut dot = Dot::default();
    let mut i = 0;
    while i < toks.len() {
        let first = toks[i].1.clone();
        i += 1;
        let mut to = None;
        if toks.get(i).map(|t| t.0) == Some("arrow") {
            to = Some(toks[i + 1].1.clone());
            i += 2;
        }
        let mut attrs = HashMap::new();
        if toks.get(i).map(|t| t.1.as_str()) == Some("[") {
            i += 1;
            while toks[i].1 != "]" {
                let k = toks[i].1.clone();
                assert_eq!(toks[i + 1].1, "=", "attribute {k}");
                attrs.insert(k, toks[i + 2].1.clone());
                i += 3;
                if toks[i].1 == "," {
                    i += 1;
                }
            }
            i += 1;
        }
        assert_eq!(toks[i].1, ";", "statement ends");
        i += 1;
        match to {
            Some(t) => dot.edges.push((first, t, attrs)),
            None if first == "graph" || first == "node" => {}
            None => {
                dot.nodes.insert(first, attrs);
            }
        }
    }
    dot
}
