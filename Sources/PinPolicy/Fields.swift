import Yams

/// A mapping's values by key, after its keys were checked against a schema.
struct Fields {
    let node: Node
    private(set) var values: [String: Node] = [:]

    init(node: Node) { self.node = node }

    mutating func set(_ name: String, value: Node) { values[name] = value }

    subscript(_ name: String) -> Node? { values[name] }
}
