import Foundation
import Yams

/// Loads a policy file strictly (docs/policy.md, "Policy file"): every unknown key, duplicate key, bad
/// value, alias or merge key is an error with file, line and column. All errors are collected, so
/// one run of `pinproxy check` shows them all.
public enum PolicyLoader {
    /// The most a policy file may be; a bigger one is a mistake (a log file or a disk image named
    /// as the policy), and reading it whole would cost the proxy that much memory on every SIGHUP.
    public static let maxFileBytes = 16 << 20

    /// Reads and loads a policy file. A file that cannot be read is one error at line 0, column 0,
    /// saying why in plain words: `cannot read PATH: No such file or directory (errno 2)`.
    public static func load(file path: String, pinFiles: PinFileLoader?) throws(PolicyLoadError) -> Policy {
        let bytes: [UInt8]
        do {
            bytes = try PlainFile.contents(of: path, limit: maxFileBytes)
        } catch {
            throw PolicyLoadError([PolicyError(file: path, line: 0, column: 0, message: error.description)])
        }
        // A UTF-8 byte order mark (some Windows editors write one) is dropped, as Foundation did.
        let body = bytes.starts(with: [0xef, 0xbb, 0xbf]) ? bytes.dropFirst(3) : bytes[...]
        guard let text = String(validating: body, as: UTF8.self) else {
            throw PolicyLoadError([PolicyError(file: path, line: 0, column: 0, message: "cannot read \(path): it is not UTF-8 text")])
        }
        let directory = (path as NSString).deletingLastPathComponent
        return try load(yaml: text, source: path, baseDirectory: directory.isEmpty ? "." : directory, pinFiles: pinFiles)
    }

    public static func load(yaml: String, source: String, baseDirectory: String = ".",
                            pinFiles: PinFileLoader? = nil) throws(PolicyLoadError) -> Policy {
        let reader = PolicyReader(file: source, baseDirectory: baseDirectory, pinFiles: pinFiles)
        if let deep = NestingScan.firstTooDeep(yaml) {
            throw PolicyLoadError([PolicyError(file: source, line: deep.line, column: deep.column,
                                               message: "the YAML nests deeper than \(NestingScan.limit) levels here; a policy needs about 5, so this is refused before it is parsed")])
        }
        // Each duplicate key is reported where it is, and the load goes on to the file's other errors.
        var duplicates = DuplicateKeys(yaml: yaml, file: source)
        let root: Node?
        do {
            root = try duplicates.compose()
        } catch {
            throw PolicyLoadError(duplicates.errors + [reader.yamlError(error)])
        }
        guard let root else {
            throw PolicyLoadError([PolicyError(file: source, line: 1, column: 1, message: "the policy file is empty; it needs at least 'version: 1' and 'defaults: {unpinned: allow|deny}'")])
        }
        let policy = reader.readPolicy(root)
        let errors = duplicates.errors + reader.errors.filter { !duplicates.mentionsPlaceholder($0.message) }
        if let policy, errors.isEmpty { return policy }
        throw PolicyLoadError(errors.sorted { ($0.line, $0.column) < ($1.line, $1.column) })
    }
}
