package idemgen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/99designs/gqlgen/api"
	"github.com/99designs/gqlgen/codegen/config"
)

// Generate is gqlgen's step with the Plugin, which leaves the tree as it
// was when it fails:
//
//	cfg, err := config.LoadConfigFromDefaultLocations()
//	err = idemgen.Generate(cfg)
//
// gqlgen's api.Generate deletes the generated executor and models before
// it reads the schema, so a schema it refuses (a type undefined, a
// resolver idemgen refuses) leaves the application without them, and the
// next command fails somewhere else (go: finding module for package
// …/graph/model). Generate keeps the Go files of the directories gqlgen
// writes (executor, models, resolvers, federation), and puts them back as
// they were, removing what gqlgen added, when gqlgen fails. opts are
// gqlgen's options, after the Plugin.
func Generate(cfg *config.Config, opts ...api.Option) error {
	kept, err := keepGenerated(cfg)
	if err != nil {
		return err
	}
	if err := api.Generate(cfg, append([]api.Option{api.PrependPlugin(NewPlugin())}, opts...)...); err != nil {
		if rerr := kept.restore(); rerr != nil {
			return errors.Join(err, rerr)
		}
		return fmt.Errorf("%w (the generated files are as they were before)", err)
	}
	return nil
}

// generatedFiles is the Go files of the directories gqlgen writes, as
// they were before it ran.
type generatedFiles map[string]map[string][]byte // directory → file name → contents

func keepGenerated(cfg *config.Config) (generatedFiles, error) {
	dirs := []string{filepath.Dir(cfg.Exec.Filename), cfg.Exec.DirName, cfg.Resolver.DirName}
	if cfg.Model.IsDefined() {
		dirs = append(dirs, filepath.Dir(cfg.Model.Filename))
	}
	if cfg.Resolver.Filename != "" {
		dirs = append(dirs, filepath.Dir(cfg.Resolver.Filename))
	}
	if cfg.Federation.IsDefined() {
		dirs = append(dirs, filepath.Dir(cfg.Federation.Filename))
	}
	kept := generatedFiles{}
	for _, dir := range dirs {
		if dir == "" || kept[dir] != nil {
			continue
		}
		files, err := goFiles(dir)
		if err != nil {
			return nil, err
		}
		kept[dir] = map[string][]byte{}
		for _, name := range files {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return nil, errorf("keep %s before gqlgen runs: %v", filepath.Join(dir, name), err)
			}
			kept[dir][name] = b
		}
	}
	return kept, nil
}

// restore writes back every kept file that gqlgen changed or removed, and
// removes the Go files it added.
func (kept generatedFiles) restore() error {
	var errs []error
	for dir, files := range kept {
		now, err := goFiles(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, name := range now {
			if _, ok := files[name]; !ok {
				errs = append(errs, os.Remove(filepath.Join(dir, name)))
			}
		}
		for name, b := range files {
			path := filepath.Join(dir, name)
			if cur, err := os.ReadFile(path); err == nil && string(cur) == string(b) {
				continue
			}
			errs = append(errs, os.WriteFile(path, b, 0o644))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return errorf("put the generated files back after gqlgen failed: %v", err)
	}
	return nil
}

// goFiles lists the Go files of dir (none if dir does not exist yet).
func goFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("%v", err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".go") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}
