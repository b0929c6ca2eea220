; HAND-WRITTEN PLAN: written by a person for the demo's bundled replay model, which answers
; the order below with this file. It is not the output of a language model.
; order: Patrol between 6,8 and 10,8 while any enemy is alive, at most 4 rounds, then go to 10,1.
        MOV R8, 4               ; rounds left
patrol:
        CALL find_nearest_enemy
        POP R5                  ; enemy id, 0 = none left
        CMP R5, 0
        JE leave
        MOV R1, 6
        MOV R2, 8
        CALL goto
        MOV R1, 10
        MOV R2, 8
        CALL goto
        DEC R8
        JNZ patrol
leave:
        MOV R1, 10
        MOV R2, 1
        CALL goto
        HLT

goto:                           ; walk to (R1, R2); give up after 4 failed steps in a row
        MOV R10, 0
goto_step:
        PUSH R1
        PUSH R2
        CALL make_one_step
        POP R9
        CMP R9, 1
        JE goto_moved
        CALL get_current_position
        POP R3
        POP R4
        CMP R3, R1
        JNE goto_blocked
        CMP R4, R2
        JE goto_done            ; arrived
goto_blocked:
        INC R10
        CMP R10, 4
        JL goto_step
goto_done:
        RET
goto_moved:
        MOV R10, 0
        JMP goto_step
