"""The output folder's file names and the one atomic writer every file goes through.

names.py   every file and folder name of a campaign's output folder (imports nothing)
atomic.py  whole files or none: temporary, fsync, rename, fsync the folder; every file in one
           mode, a plain open()'s (0o666 less the umask) (imports nothing)
"""
