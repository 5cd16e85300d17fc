package readmepath

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// documents returns the Markdown files a reader is sent to, relative to the
// module's root: those of the root, of docs/ and of docs/guide/.
func documents(t *testing.T, root string) []string {
	t.Helper()
	var docs []string
	for _, pattern := range []string{"*.md", "docs/*.md", "docs/guide/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range m {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				t.Fatal(err)
			}
			docs = append(docs, filepath.ToSlash(rel))
		}
	}
	if len(docs) == 0 {
		t.Fatal("no documents found")
	}
	return docs
}

// Only the guides TestReadmePath follows may mark blocks: a marked block
// anywhere else would look tested and not be.
func TestOnlyTheGuideMarksBlocks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range documents(t, root) {
		if doc == guide || doc == metricsGuide || doc == outboxGuide {
			continue
		}
		if steps := markedSteps(t, filepath.Join(root, doc)); len(steps) > 0 {
			t.Errorf("%s:%d: a marked block outside %s, %s and %s, which TestReadmePath does not follow", doc, steps[0].line, guide, metricsGuide, outboxGuide)
		}
	}
}

var (
	fence      = regexp.MustCompile("(?m)^```.*$")
	inlineCode = regexp.MustCompile("`[^`\n]*`")
	link       = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	heading    = regexp.MustCompile(`^#{1,6} +(.*?) *#*$`)
)

// TestDocLinks checks every relative link of the root's and docs/'s
// Markdown files: the file or folder it names exists, and so does the
// heading its fragment names (as GitHub makes anchors of headings).
func TestDocLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	anchorsOf := map[string]map[string]bool{}
	anchors := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := headingAnchors(string(b))
		anchorsOf[path] = a
		return a
	}
	checked := 0
	for _, doc := range documents(t, root) {
		path := filepath.Join(root, filepath.FromSlash(doc))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range outsideCode(string(b)) {
			for _, m := range link.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				file, frag, _ := strings.Cut(target, "#")
				dest := path
				if file != "" {
					dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
					if _, err := os.Stat(dest); err != nil {
						t.Errorf("%s:%d: link %s: no such file or folder", doc, n+1, target)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %s: a fragment on a file that is not Markdown", doc, n+1, target)
					continue
				}
				if !anchors(dest)[frag] {
					t.Errorf("%s:%d: link %s: no heading makes the anchor #%s", doc, n+1, target, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: is the link pattern right?")
	}
	t.Logf("%d relative links checked", checked)
}

// outsideCode returns the lines of a Markdown text with those of fenced
// blocks blanked, so that line numbers stay the file's.
func outsideCode(text string) []string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if fence.MatchString(l) {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, punctuation dropped, spaces made hyphens, and
// -1, -2, … after a repeated one.
func headingAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, l := range outsideCode(text) {
		m := heading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}
